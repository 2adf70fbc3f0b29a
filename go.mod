module github.com/kvpilot/kvpilot

go 1.26.0

require (
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
)
