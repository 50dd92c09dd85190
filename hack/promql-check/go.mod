module ocpgpu.local/promql-check

go 1.25

require github.com/prometheus/prometheus v0.316.0
