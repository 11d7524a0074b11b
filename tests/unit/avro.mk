# tests for avro
