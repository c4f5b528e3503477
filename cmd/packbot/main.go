// Command packbot runs credential-driven AI chat agents reached from a wallet app over DIDComm,
// and the tools around them (pack validation, key management). See `packbot help`.
package main

import (
	"context"
	"os"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv))
}
