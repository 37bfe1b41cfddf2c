package releasehistory

import (
	"net/url"
	"regexp"
	"strings"

	rr "github.com/JorisJonkers-dev/delivery/internal/releaserecord"
)

// commitPattern is a Git object name, abbreviated or whole (SHA-1 or
// SHA-256): a branch or tag moves, so only a commit is linked.
var commitPattern = regexp.MustCompile(`^[0-9a-f]{7,64}$`)

// scpPattern is Git's scp-like address, user@host:owner/repo.
var scpPattern = regexp.MustCompile(`^[A-Za-z0-9._-]+@([A-Za-z0-9.-]+):([^/][^:]*)$`)

// CommitURL is the web page of the release's commit, or "" when the record
// cannot say one: the repository must be a web host's (https, ssh or
// scp-like to one) and the revision a commit. The path is the one GitHub,
// Gitea and Forgejo serve and GitLab redirects: <repo>/commit/<revision>.
func CommitURL(gitURL, revision string) string {
	if !commitPattern.MatchString(revision) {
		return ""
	}
	if m := scpPattern.FindStringSubmatch(gitURL); m != nil {
		gitURL = "https://" + m[1] + "/" + m[2]
	}
	u, err := url.Parse(gitURL)
	if err != nil || u.Host == "" || u.User != nil && u.Scheme != "ssh" || u.RawQuery != "" || u.Fragment != "" {
		return ""
	}
	switch u.Scheme {
	case "https", "http":
	case "ssh":
		u.Scheme, u.User, u.Host = "https", nil, u.Hostname()
	default:
		return ""
	}
	repo := strings.TrimSuffix(strings.Trim(u.Path, "/"), ".git")
	if strings.Count(repo, "/") < 1 || strings.Contains(repo, "..") {
		return ""
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/" + repo + "/commit/" + revision}).String()
}

// Moved is what the release moved in the cluster as its record names it:
// the object carrying it and the Flagger Canaries (or pods) it changed.
// The record keeps no address for either, so they are shown, not linked.
type Moved struct {
	// Object is <kind>/<namespace>/<name> and Generation its
	// metadata.generation, from objectGeneration.
	Object, Generation string
	// Members are the Canaries' members (Flux with Flagger) or the pod
	// template hash (Argo Rollouts), from podHash.
	Members []string
}

// MovedOf reads objectGeneration and podHash; a value not in their shape
// is shown whole rather than guessed at.
func MovedOf(r rr.Record) Moved {
	var m Moved
	if r.ObjectGeneration != "" {
		obj, gen, ok := strings.Cut(r.ObjectGeneration, "=")
		parts := strings.Split(obj, "/")
		if ok && len(parts) >= 3 {
			m.Object, m.Generation = strings.Join(parts[:3], "/"), gen
		} else {
			m.Object = r.ObjectGeneration
		}
	}
	if r.PodHash != "" {
		for _, member := range strings.Split(r.PodHash, ",") {
			name, _, _ := strings.Cut(member, "=")
			m.Members = append(m.Members, name)
		}
	}
	return m
}
