package releasehistory_test

import (
	"strings"
	"testing"

	rh "github.com/JorisJonkers-dev/delivery/internal/releasehistory"
	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

func TestCommitURL(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct{ gitURL, revision, want string }{
		{"https://github.com/acme/docs", rev, "https://github.com/acme/docs/commit/" + rev},
		{"https://github.com/acme/docs.git", "0123abc", "https://github.com/acme/docs/commit/0123abc"},
		{"https://gitlab.example/group/sub/docs.git/", rev, "https://gitlab.example/group/sub/docs/commit/" + rev},
		{"git@github.com:acme/docs.git", rev, "https://github.com/acme/docs/commit/" + rev},
		{"ssh://git@git.example:2222/acme/docs.git", rev, "https://git.example/acme/docs/commit/" + rev},
		{"https://github.com/acme/docs", "main", ""},      // a branch moves
		{"https://github.com/acme/docs", "", ""},          // no revision
		{"", rev, ""},                                     // no repository
		{"javascript:alert(1)//github.com/a/b", rev, ""},  // not a web host
		{"https://user:pw@github.com/acme/docs", rev, ""}, // a secret in the address is not repeated
		{"https://github.com/acme/docs?x=1", rev, ""},     // not a repository's address
		{"https://github.com/docs", rev, ""},              // no owner
		{"https://github.com/acme/../../evil", rev, ""},   // climbs out
		{"oci://ghcr.io/acme/docs", rev, ""},              // an artifact, no commit page
		{"https://github.com/acme/docs", strings.Repeat("a", 65), ""},
	} {
		if got := rh.CommitURL(tc.gitURL, tc.revision); got != tc.want {
			t.Errorf("CommitURL(%q, %q) = %q, want %q", tc.gitURL, tc.revision, got, tc.want)
		}
	}
}

func TestMovedOf(t *testing.T) {
	for _, tc := range []struct{ generation, podHash, want string }{
		{"", "", "||"},
		{"OCIRepository/apps/project-docs/3f1c-uid=7", "web=abc,worker=def", "OCIRepository/apps/project-docs|7|web,worker"},
		{"Rollout/docs/docs=2", "7c9d8f", "Rollout/docs/docs|2|7c9d8f"},
		{"odd", "", "odd||"},
	} {
		m := rh.MovedOf(rr.Record{ObjectGeneration: tc.generation, PodHash: tc.podHash})
		if got := m.Object + "|" + m.Generation + "|" + strings.Join(m.Members, ","); got != tc.want {
			t.Errorf("%q %q: %q, want %q", tc.generation, tc.podHash, got, tc.want)
		}
	}
}

// TestPageLinks: a release's commit is linked only where CommitURL says
// one, and what it moved is shown as text.
func TestPageLinks(t *testing.T) {
	recs := history(t)
	recs[2].GitURL, recs[2].GitRevision = "https://github.com/acme/docs", "0123abc"
	recs[2].ObjectGeneration, recs[2].PodHash = "OCIRepository/apps/project-docs=7", "web=abc,worker=def"
	recs[3].GitURL, recs[3].GitRevision = "javascript:alert(1)", "0123abd"
	h := api(t, &fakeRecords{recs: recs})
	body := get(t, h, "/?release="+recs[2].ReleaseID).Body.String()
	if strings.Count(body, `href="https://github.com/acme/docs/commit/0123abc"`) != 2 || strings.Contains(body, "javascript:") ||
		!strings.Contains(body, "OCIRepository/apps/project-docs at generation 7") || !strings.Contains(body, `<dd class="members">web, worker</dd>`) {
		t.Fatal(body)
	}
	// A revision with no web page is said, not linked.
	if body := get(t, h, "/?release="+recs[3].ReleaseID).Body.String(); !strings.Contains(body, "<dt>commit</dt><dd>0123abd</dd>") {
		t.Fatal(body)
	}
}
