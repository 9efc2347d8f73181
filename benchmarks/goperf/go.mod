module github.com/letterbox/bench-goperf

go 1.24.0

require github.com/apache/pulsar-client-go v0.19.0
