package reporter

import (
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-github/v75/github"
)

// GitHub's refusals of a unit's own making are told from those of the App's
// or the moment's: only the first are skipped.
func TestRefusal(t *testing.T) {
	answer := func(code int, message string) error {
		return &github.ErrorResponse{Response: &http.Response{StatusCode: code}, Message: message}
	}
	for _, c := range []struct {
		name    string
		err     error
		refused bool
	}{
		{"an archived repository", answer(http.StatusForbidden, "Repository was archived so is read-only."), true},
		{"a Deployment gone", answer(http.StatusNotFound, "Not Found"), true},
		{"gone for good", answer(http.StatusGone, "Gone"), true},
		{"a status GitHub will not take", answer(http.StatusUnprocessableEntity, "Validation Failed"), true},
		{"a repository outside the App's reach", answer(http.StatusForbidden, "Resource not accessible by integration"), true},
		{"bad credentials", answer(http.StatusUnauthorized, "Bad credentials"), false},
		{"GitHub down", answer(http.StatusBadGateway, "Bad Gateway"), false},
		{"a rate limit", &github.RateLimitError{Response: &http.Response{StatusCode: http.StatusForbidden}, Message: "API rate limit exceeded"}, false},
		{"no answer", errors.New("connection refused"), false},
	} {
		if got := errors.Is(refusal(c.err), ErrRefused); got != c.refused {
			t.Errorf("%s: refused %v, want %v", c.name, got, c.refused)
		}
	}
}
