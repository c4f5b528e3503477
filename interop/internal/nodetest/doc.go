// Package nodetest holds what the interop harnesses (interop/credo, interop/mcp-everything)
// share to run a Node program from a Go test: finding node and the harness's npm install, and
// skipping a test when either is missing — or failing it when CI=true, since .ci/run installs
// both. It starts nothing: each harness runs and drives its own process.
package nodetest
