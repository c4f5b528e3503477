package packs

import _ "embed"

const demoPackName = "packs/demo/agent-pack.yaml"

//go:embed demo/agent-pack.yaml
var demoPack []byte

// DemoPack returns the embedded demo pack (packs/demo), the default when no pack is configured.
func DemoPack() []byte { return append([]byte(nil), demoPack...) }
