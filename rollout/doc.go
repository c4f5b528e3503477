// Package rollout is packbot's deployment state: which version of the agent pack is in force,
// what each replica runs, and the switch of a running bot to a new pack (README, "Swapping the
// pack live").
//
// A [Registry] keeps, in the store's records area, the applied versions (each pack's text by
// its digest, and the version in force), the digest each pack file had when serve last read
// it, and one report per replica. [Registry.Apply] makes a pack the next version with a
// compare-and-swap on the version in force ([store.RecordCondition]): two applies racing, from
// `packbot pack apply` or from replicas reading a changed file, get distinct versions, and
// none is lost. A [Replica] is one serve process in the rollout: at start it decides which pack
// it runs ([Replica.Adopt]); then it watches its pack file and the version in force, and moves
// to the latest (version and digest) through a [Switcher], whose [Parts] are one small
// interface per thing switched (the MCP pool, the OAuth servers, approvals, the conversations…).
//
// It does not parse packs (package packs does, through the function it is given), build
// language models or flows engines (the [Builder] of cmd/packbot does), or handle signals: the
// command wires those in.
//
//	reg := rollout.NewRegistry(st, nil)
//	v, created, err := reg.Apply(ctx, text, "/etc/packbot/agent-pack.yaml", rollout.OriginApply)
//	rs, err := reg.Await(ctx, v) // every live replica runs v (or one refused it: ErrRefused)
package rollout
