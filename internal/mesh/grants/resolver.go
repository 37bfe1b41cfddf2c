package grants

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
)

// ClaimsUpdate is where the server's full resolver takes a changed account.
const ClaimsUpdate = "$SYS.REQ.CLAIMS.UPDATE"

// Requester is what pushing an account takes of a connection: one request
// and its answer (a *nats.Conn of a system-account user is one).
type Requester interface {
	RequestWithContext(ctx context.Context, subject string, data []byte) (*nats.Msg, error)
}

// resolverAnswer is the server's answer to a claims update.
type resolverAnswer struct {
	Error *struct {
		Code        int    `json:"code"`
		Description string `json:"description"`
	} `json:"error,omitempty"`
}

// Push hands a signed account JWT to the server's resolver, which stores it,
// passes it to the cluster's other servers and applies it at once: a user
// the account revokes is disconnected. A refusal is an error naming why.
func Push(ctx context.Context, r Requester, accountJWT string) error {
	msg, err := r.RequestWithContext(ctx, ClaimsUpdate, []byte(accountJWT))
	if err != nil {
		return fmt.Errorf("push the account to the resolver: %w", err)
	}
	var answer resolverAnswer
	if err := json.Unmarshal(msg.Data, &answer); err != nil {
		return fmt.Errorf("push the account to the resolver: an answer that does not decode: %w", err)
	}
	if answer.Error != nil {
		return fmt.Errorf("push the account to the resolver: refused (%d): %s", answer.Error.Code, answer.Error.Description)
	}
	return nil
}
