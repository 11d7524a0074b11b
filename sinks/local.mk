# sinks
