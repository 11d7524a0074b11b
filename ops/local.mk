# ops
