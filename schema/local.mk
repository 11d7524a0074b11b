# schema
