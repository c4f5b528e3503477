// Package packs loads agent packs: the one file (agent-pack.yaml, .yml or .json) in which a
// deployer describes an agent — texts per language, LLM, flows, menu, MCP servers and who may
// use which tool, prompt and resource. Hologram packs load unchanged.
//
// [Load] finds the pack (the --pack flag, AGENT_PACK_PATH, ./agent-packs, else the embedded
// demo), expands ${NAME} and ${NAME:-default} placeholders from the environment it is given,
// applies the Hologram environment overrides and MCP_SERVERS_CONFIG, fills every default, and
// validates. Every problem is reported at once with file:line:column and the field path; an
// invalid pack is an [*InvalidError], never a silent fallback. Warnings (unknown keys,
// unsupported blocks, unset variables in plain texts) travel in [Pack.Warnings].
//
// The package never reads the process environment or the working directory implicitly: callers
// pass an [Env] (os.LookupEnv, or [WithDotEnv] to add a .env file) and paths. It knows nothing of
// access decisions (package rbac) or MCP connections (package mcp).
//
//	env, err := packs.WithDotEnv(".env", os.LookupEnv)
//	p, err := packs.Load(packs.Options{Path: "packs/demo", Env: env})
//	var invalid *packs.InvalidError
//	if errors.As(err, &invalid) { for _, pr := range invalid.Problems { fmt.Println(pr) } }
package packs
