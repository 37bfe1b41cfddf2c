package releaserecord

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"net/http"
	"strings"

	"github.com/JorisJonkers-dev/delivery/internal/server"
)

// SignatureHeader is where Flux's generic-hmac provider signs the body:
// <algorithm>=<hex HMAC of the body>.
const SignatureHeader = "X-Signature"

// VerifySignature checks a generic-hmac signature of body under key:
// sha256, sha384 or sha512, the HMAC in hex.
func VerifySignature(key, body []byte, header string) error {
	alg, sum, ok := strings.Cut(header, "=")
	if !ok {
		return errors.New("the signature is not <algorithm>=<hex>")
	}
	var h func() hash.Hash
	switch alg {
	case "sha256":
		h = sha256.New
	case "sha384":
		h = sha512.New384
	case "sha512":
		h = sha512.New
	default:
		return errors.New("the signature's algorithm is not sha256, sha384 or sha512")
	}
	got, err := hex.DecodeString(sum)
	if err != nil {
		return errors.New("the signature is not hex")
	}
	mac := hmac.New(h, key)
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return errors.New("the signature does not match the body")
	}
	return nil
}

// Prompts answers Flux's notification Provider (POST /flux) and Flagger's
// event webhook (POST /flagger). Their bodies are prompts to look again,
// never evidence: read within the bound and discarded. With HMACKey set, a
// /flux body must carry a generic-hmac signature under it, else 401.
type Prompts struct {
	HMACKey []byte
	// Prompt asks the observer to look again; it never blocks.
	Prompt func()
}

// Routes registers POST /flux and POST /flagger.
func (p *Prompts) Routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /flux", p.handle(true))
	mux.HandleFunc("POST /flagger", p.handle(false))
}

func (p *Prompts) handle(signed bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			if server.TooLarge(err) {
				server.Answer(w, http.StatusRequestEntityTooLarge, "the event is larger than the bound")
				return
			}
			server.Answer(w, http.StatusBadRequest, "the event could not be read")
			return
		}
		if signed && len(p.HMACKey) > 0 {
			if err := VerifySignature(p.HMACKey, body, r.Header.Get(SignatureHeader)); err != nil {
				server.Answer(w, http.StatusUnauthorized, "X-Signature: "+err.Error())
				return
			}
		}
		p.Prompt()
		server.Answer(w, http.StatusAccepted, "the units will be looked at again")
	}
}
