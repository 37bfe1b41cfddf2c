package releasegate

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/JorisJonkers-dev/delivery/internal/release"
)

// Outcome is how the gate answers a question.
type Outcome int

// The three outcomes; the HTTP handlers map them to 200, 409 and 503.
const (
	Yes Outcome = iota
	NotYet
	Unanswerable
)

// Answer is a decision: its outcome and one line saying why. For Unanswerable
// the reason is the cause the gate logs; the caller is told only that the gate
// could not answer.
type Answer struct {
	Outcome Outcome
	Reason  string
}

func yes(format string, args ...any) Answer {
	return Answer{Outcome: Yes, Reason: fmt.Sprintf(format, args...)}
}

func notYet(format string, args ...any) Answer {
	return Answer{Outcome: NotYet, Reason: fmt.Sprintf(format, args...)}
}

func unanswerable(format string, args ...any) Answer {
	return Answer{Outcome: Unanswerable, Reason: fmt.Sprintf(format, args...)}
}

// list joins what a reason names, keeping the reply to one short line.
func list(items []string) string {
	const most = 5
	if len(items) > most {
		return strings.Join(items[:most], "; ") + "; and " + strconv.Itoa(len(items)-most) + " more"
	}
	return strings.Join(items, "; ")
}

// staleReason is the one refusal for a question about a Canary that is not
// there and one about a render that has been replaced: they read the same, so
// an answer says nothing about which Canaries exist.
func staleReason(q release.Question) string {
	return fmt.Sprintf("Canary %s does not carry revision %s", q.Process, q.Tag())
}

// Identify decides whether a question is about the asking member's current
// release: its Canary must be there, be this Application's and carry this
// revision. found is false when the Canary was not there.
func Identify(q release.Question, in *release.Inputs, c release.Canary, found bool) (Answer, bool) {
	if _, ok := in.Member(q.Process); !ok {
		return unanswerable("process %s is no member of Application %s", q.Process, q.Application), false
	}
	if !found {
		return notYet("%s", staleReason(q)), false
	}
	app, rev, err := release.CanaryRelease(c)
	if err != nil {
		return unanswerable("%v", err), false
	}
	if app != "" && app != q.Application {
		return unanswerable("Canary %s belongs to Application %s, not %s", c.Name, app, q.Application), false
	}
	if app == "" || rev != q.Revision {
		return notYet("%s", staleReason(q)), false
	}
	return Answer{}, true
}
