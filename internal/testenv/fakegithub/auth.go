package fakegithub

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v4"
)

// maxJWTLifetime is GitHub's bound on how far ahead an App JWT may expire.
const maxJWTLifetime = 10 * time.Minute

// clockSkew is the drift GitHub tolerates on an App JWT's iat.
const clockSkew = 60 * time.Second

// authenticate checks the credential a route takes and answers 401 when it is
// missing or wrong, as GitHub does ("Bad credentials", or the JWT's fault).
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, want string) (string, bool) {
	scheme, credential, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	scheme = strings.ToLower(scheme)
	if credential == "" || (scheme != "bearer" && scheme != "token") {
		writeError(w, http.StatusUnauthorized, "Requires authentication")
		return "", false
	}
	switch want {
	case "app":
		if err := s.verifyAppJWT(credential); err != nil {
			writeError(w, http.StatusUnauthorized, err.Error())
			return "", false
		}
		return "app", true
	default:
		if !s.validToken(credential) {
			writeError(w, http.StatusUnauthorized, "Bad credentials")
			return "", false
		}
		return "installation", true
	}
}

// verifyAppJWT holds an App JWT to GitHub's rules: signed RS256 with the App's
// key, issued by the App's id, issued no later than now, expiring within ten minutes.
func (s *Server) verifyAppJWT(raw string) error {
	now := s.clock()
	claims := &jwt.RegisteredClaims{}
	parser := jwt.NewParser(jwt.WithValidMethods([]string{"RS256"}), jwt.WithoutClaimsValidation())
	if _, err := parser.ParseWithClaims(raw, claims, func(*jwt.Token) (any, error) { return s.public, nil }); err != nil {
		return fmt.Errorf("a JSON web token could not be decoded: %w", err)
	}
	switch {
	case claims.Issuer != strconv.FormatInt(s.AppID, 10):
		return fmt.Errorf("'Issuer' claim ('iss') must be the App's id %d, not %q", s.AppID, claims.Issuer)
	case claims.IssuedAt == nil:
		return errors.New("'Issued at' claim ('iat') is missing")
	case claims.IssuedAt.After(now.Add(clockSkew)):
		return errors.New("'Issued at' claim ('iat') must be an Integer representing a time in the past")
	case claims.ExpiresAt == nil:
		return errors.New("'Expiration time' claim ('exp') is missing")
	case !claims.ExpiresAt.After(now):
		return errors.New("'Expiration time' claim ('exp') is in the past")
	case claims.ExpiresAt.After(now.Add(maxJWTLifetime)):
		return errors.New("'Expiration time' claim ('exp') is too far in the future")
	}
	return nil
}

func (s *Server) clock() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now()
}

func (s *Server) validToken(token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	expires, ok := s.tokens[token]
	return ok && s.now().Before(expires)
}

// installationToken is GitHub's answer to POST /app/installations/{id}/access_tokens.
type installationToken struct {
	Token               string            `json:"token"`
	ExpiresAt           time.Time         `json:"expires_at"`
	Permissions         map[string]string `json:"permissions"`
	RepositorySelection string            `json:"repository_selection"`
}

func (s *Server) createInstallationToken(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("installation_id") != strconv.FormatInt(s.InstallationID, 10) {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	s.mu.Lock()
	token := randomToken()
	expires := s.now().Add(s.tokenTTL).UTC().Truncate(time.Second)
	s.tokens[token] = expires
	s.issued++
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, installationToken{
		Token:               token,
		ExpiresAt:           expires,
		Permissions:         map[string]string{"contents": "write", "deployments": "write", "metadata": "read"},
		RepositorySelection: "selected",
	})
}
