module ocpgpu.local/validate-bundle

go 1.25

// The validators `operator-sdk bundle validate` runs (operator-sdk itself is not served by
// the module proxy here).  The version is the one opm v1.73.0 and OLM build with.
require github.com/operator-framework/api v0.45.0
