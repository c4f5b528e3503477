package oauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strings"
	"time"
)

// Client assertion (RFC 7523 §2.2, RFC 7521 §4.2) constants.
const (
	assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
	// assertionTTL is how long a client assertion is valid: long enough for clocks a little
	// apart, short enough that a captured one is of little use (each has its own jti anyway).
	assertionTTL = time.Minute
	// maxKeyFile bounds what is read of a private key file.
	maxKeyFile = 64 << 10
)

// JWS algorithms packbot signs client assertions with.
const (
	algES256 = "ES256" // ECDSA P-256 with SHA-256 (an EC P-256 key)
	algRS256 = "RS256" // RSASSA-PKCS1-v1_5 with SHA-256 (an RSA key of 2048 bits or more)
)

// assertionKey is the private key a machine client signs its assertions with. Formatting it
// shows nothing of the key.
type assertionKey struct {
	signer crypto.Signer
	alg    string
	kid    string
}

func (assertionKey) String() string     { return "[private key]" }
func (k assertionKey) GoString() string { return k.String() }

// loadAssertionKey reads a PEM private key: PKCS#8, SEC1 (EC) or PKCS#1 (RSA). An EC key must
// be on P-256 (ES256), an RSA key at least 2048 bits long (RS256). Errors never quote the file.
func loadAssertionKey(path, kid string) (assertionKey, error) {
	info, err := os.Stat(path)
	if err != nil {
		return assertionKey{}, err
	}
	if !info.Mode().IsRegular() || info.Size() > maxKeyFile {
		return assertionKey{}, fmt.Errorf("%s is not a PEM file (a regular file of at most %d bytes)", path, maxKeyFile)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return assertionKey{}, err
	}
	defer clear(data)
	for rest := data; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			return assertionKey{}, fmt.Errorf("%s holds no PEM private key", path)
		}
		if !strings.HasSuffix(block.Type, "PRIVATE KEY") {
			continue
		}
		defer clear(block.Bytes)
		if _, encrypted := block.Headers["Proc-Type"]; encrypted || block.Type == "ENCRYPTED PRIVATE KEY" {
			return assertionKey{}, fmt.Errorf("%s: the key is encrypted; give packbot an unencrypted key file readable only by it", path)
		}
		var key any
		switch block.Type {
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		default:
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		}
		if err != nil {
			return assertionKey{}, fmt.Errorf("%s: parse %s: %w", path, block.Type, err)
		}
		return newAssertionKey(key, kid)
	}
}

// newAssertionKey chooses the algorithm of key.
func newAssertionKey(key any, kid string) (assertionKey, error) {
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return assertionKey{}, fmt.Errorf("an EC key on %s: packbot signs ES256, which needs P-256", k.Curve.Params().Name)
		}
		return assertionKey{signer: k, alg: algES256, kid: kid}, nil
	case *rsa.PrivateKey:
		if k.N.BitLen() < 2048 {
			return assertionKey{}, fmt.Errorf("an RSA key of %d bits: RS256 needs 2048 bits or more", k.N.BitLen())
		}
		return assertionKey{signer: k, alg: algRS256, kid: kid}, nil
	}
	return assertionKey{}, fmt.Errorf("a %T: packbot signs with an EC P-256 key (ES256) or an RSA key (RS256)", key)
}

// sign returns a client assertion (RFC 7523 §3): iss and sub the client id, aud the audience
// (the authorization server's issuer, RFC 7523bis), a short exp, iat, and a jti that is never
// reused.
func (k assertionKey) sign(clientID, audience string, now time.Time) (string, error) {
	header := map[string]string{"alg": k.alg, "typ": "JWT"}
	if k.kid != "" {
		header["kid"] = k.kid
	}
	claims := map[string]any{
		"iss": clientID, "sub": clientID, "aud": audience,
		"iat": now.Unix(), "exp": now.Add(assertionTTL).Unix(), "jti": rand.Text(),
	}
	jws, err := signJWS(k.signer, k.alg, header, claims)
	if err != nil {
		return "", fmt.Errorf("sign client assertion: %w", err)
	}
	return jws, nil
}

// signJWS returns the compact JWS (RFC 7515) of claims under header, signed by signer with
// SHA-256: alg ES256 (an ECDSA signature as R || S) or RS256.
func signJWS(signer crypto.Signer, alg string, header any, claims map[string]any) (string, error) {
	h, err := json.Marshal(header)
	if err != nil {
		return "", err
	}
	c, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	digest := sha256.Sum256([]byte(input))
	sig, err := signer.Sign(rand.Reader, digest[:], crypto.SHA256)
	if err != nil {
		return "", err
	}
	if alg == algES256 {
		if sig, err = rawECDSA(sig); err != nil {
			return "", err
		}
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// rawECDSA turns an ASN.1 ECDSA P-256 signature into JWS's R || S, 32 bytes each (RFC 7518
// §3.4).
func rawECDSA(der []byte) ([]byte, error) {
	var rs struct{ R, S *big.Int }
	rest, err := asn1.Unmarshal(der, &rs)
	if err != nil || len(rest) != 0 || rs.R == nil || rs.S == nil || rs.R.BitLen() > 256 || rs.S.BitLen() > 256 {
		return nil, errors.New("malformed ECDSA signature")
	}
	out := make([]byte, 64)
	rs.R.FillBytes(out[:32])
	rs.S.FillBytes(out[32:])
	return out, nil
}
