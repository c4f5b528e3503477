// Command packbot is the one binary of packbot: `serve` runs the bot; `pack`, `keys` and the
// other subcommands are the operator's tools. main.go only dispatches; each subcommand lives in
// its own file with a constructor (newServeCmd) binding its flags to an options struct and a
// run function (runServe) that does the work, as in Dex's cmd/dex. Implementations chosen by
// configuration (the store backend) come from explicit name → factory maps here, never from
// init-time registration.
package main
