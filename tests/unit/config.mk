# tests for config
