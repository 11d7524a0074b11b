# tests for core
