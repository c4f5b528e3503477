package secret_test

import (
	"errors"
	"fmt"

	"github.com/packbot/packbot/store"
	"github.com/packbot/packbot/store/secret"
)

func ExampleKeyring() {
	env := map[string]string{
		secret.EnvKey:     "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
		secret.EnvOldKeys: "f0e0d0c0b0a090807060504030201000f1e1d1c1b1a191817161514131211101",
	}
	kr, err := secret.KeyringFromEnv(func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	alice := store.CredentialKey{Identity: "alice@example.org", Server: "github", Kind: store.KindConfig}
	sealed, err := kr.Seal(alice, []byte(`{"token":"ghp_example"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	plaintext, err := kr.Open(alice, sealed)
	fmt.Println(string(plaintext), err, sealed.KeyID == kr.CurrentKeyID())

	// The sealed value is bound to its row: copied to another user, it does not open.
	mallory := alice
	mallory.Identity = "mallory@example.org"
	_, err = kr.Open(mallory, sealed)
	fmt.Println(errors.Is(err, secret.ErrOpen))
	// Output:
	// {"token":"ghp_example"} <nil> true
	// true
}

func ExampleValue() {
	token := secret.NewValue("ghp_example")
	fmt.Printf("token %v, %s\n", token, []secret.Value{token})
	fmt.Println(token.Reveal() == "ghp_example")
	// Output:
	// token [REDACTED], [[REDACTED]]
	// true
}
