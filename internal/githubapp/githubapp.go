package githubapp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v75/github"
)

// DefaultAPIURL is github.com's REST API root.
const DefaultAPIURL = "https://api.github.com"

// Config names an App installation and where its API is.
type Config struct {
	AppID          int64
	InstallationID int64
	// PrivateKey is the App's private key, PEM encoded as GitHub hands it out.
	PrivateKey []byte
	// APIURL is the REST API root: DefaultAPIURL when empty; for GitHub
	// Enterprise Server "https://<host>/api/v3".
	APIURL string
	// Transport carries the requests; http.DefaultTransport when nil.
	Transport http.RoundTripper
	// Timeout bounds one request, token refresh included; 30 s when zero.
	Timeout time.Duration
}

// Client is an authenticated client of one App installation.
type Client struct {
	gh *github.Client
}

// New builds a client; it fails on a key that is not an RSA private key or a
// malformed API URL, before any request is made.
func New(cfg Config) (*Client, error) {
	base, err := apiRoot(cfg.APIURL)
	if err != nil {
		return nil, err
	}
	transport := cfg.Transport
	if transport == nil {
		transport = http.DefaultTransport
	}
	installation, err := ghinstallation.New(transport, cfg.AppID, cfg.InstallationID, cfg.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("the GitHub App's private key: %w", err)
	}
	// ghinstallation asks for tokens at BaseURL + "/app/installations/...".
	installation.BaseURL = strings.TrimSuffix(base.String(), "/")
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	gh := github.NewClient(&http.Client{Transport: newConditional(installation), Timeout: timeout})
	// Set the root as given rather than through WithEnterpriseURLs, which
	// would append /api/v3 to any host not named api.*.
	gh.BaseURL = base
	gh.UploadURL = base
	return &Client{gh: gh}, nil
}

func apiRoot(raw string) (*url.URL, error) {
	if raw == "" {
		raw = DefaultAPIURL
	}
	u, err := url.Parse(raw)
	if err != nil {
		// The parser's error quotes the value, which may hold a password.
		return nil, errors.New("the GitHub API URL does not parse")
	}
	if u.User != nil {
		// The App signs in with its key; a password here would only reach
		// the logs in go-github's errors, which print the request's URL.
		return nil, fmt.Errorf("the GitHub API URL %s carries credentials", u.Redacted())
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("GitHub API URL %q is not an http(s) URL", raw)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u, nil
}

// GitHub is the underlying go-github client, for the endpoints this package
// does not wrap.
func (c *Client) GitHub() *github.Client { return c.gh }

// Repository is a GitHub repository, owner/name.
type Repository struct {
	Owner, Name string
}

func (r Repository) String() string { return r.Owner + "/" + r.Name }

// ParseRepository reads "owner/name".
func ParseRepository(s string) (Repository, error) {
	owner, name, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return Repository{}, fmt.Errorf("%q is not owner/name", s)
	}
	return Repository{Owner: owner, Name: name}, nil
}

// ErrNotFound says the file (or the repository, which GitHub does not tell
// apart for an installation that cannot see it) does not exist.
var ErrNotFound = errors.New("not found")

// ConflictError says the file changed since it was read: the sha a write
// named is no longer the file's blob, or a file appeared where none was read.
type ConflictError struct {
	Path string
	// SHA is the blob the write expected; empty when it expected no file.
	SHA string
	// Message is GitHub's reason.
	Message string
}

func (e *ConflictError) Error() string {
	expected := "no file"
	if e.SHA != "" {
		expected = "blob " + e.SHA
	}
	return fmt.Sprintf("%s changed since it was read (expected %s): %s", e.Path, expected, e.Message)
}

// File is one file of one repository on one branch.
type File struct {
	client *Client
	repo   Repository
	path   string
	branch string
}

// File names path in repo on branch; an empty branch is the repository's
// default branch.
func (c *Client) File(repo Repository, path, branch string) *File {
	return &File{client: c, repo: repo, path: strings.Trim(path, "/"), branch: branch}
}

func (f *File) String() string { return f.repo.String() + ":" + f.path }

// Content is a file as read: its bytes and git's blob id for them.
type Content struct {
	Data []byte
	SHA  string
}

// Read returns the file's content and blob sha; ErrNotFound when it does not exist.
func (f *File) Read(ctx context.Context) (Content, error) {
	var opts *github.RepositoryContentGetOptions
	if f.branch != "" {
		opts = &github.RepositoryContentGetOptions{Ref: f.branch}
	}
	file, dir, _, err := f.client.gh.Repositories.GetContents(ctx, f.repo.Owner, f.repo.Name, f.path, opts)
	if err != nil {
		if status(err) == http.StatusNotFound {
			return Content{}, fmt.Errorf("read %s: %w", f, ErrNotFound)
		}
		return Content{}, fmt.Errorf("read %s: %w", f, err)
	}
	if file == nil || dir != nil || file.GetType() != "file" {
		return Content{}, fmt.Errorf("read %s: it is not a file", f)
	}
	sha := file.GetSHA()
	if file.GetEncoding() == "none" {
		// Files over 1 MiB come without content; their blob has it.
		data, _, err := f.client.gh.Git.GetBlobRaw(ctx, f.repo.Owner, f.repo.Name, sha)
		if err != nil {
			return Content{}, fmt.Errorf("read %s blob %s: %w", f, sha, err)
		}
		return Content{Data: data, SHA: sha}, nil
	}
	text, err := file.GetContent()
	if err != nil {
		return Content{}, fmt.Errorf("read %s: %w", f, err)
	}
	return Content{Data: []byte(text), SHA: sha}, nil
}

// Write commits data as the file's new content, replacing exactly the blob
// baseSHA (empty: creating a file that does not exist). When the file changed
// since that read, it fails with a *ConflictError and changes nothing.
func (f *File) Write(ctx context.Context, data []byte, baseSHA, message string) (Content, error) {
	opts := &github.RepositoryContentFileOptions{Message: github.Ptr(message), Content: data}
	if f.branch != "" {
		opts.Branch = github.Ptr(f.branch)
	}
	var (
		res *github.RepositoryContentResponse
		err error
	)
	if baseSHA == "" {
		res, _, err = f.client.gh.Repositories.CreateFile(ctx, f.repo.Owner, f.repo.Name, f.path, opts)
	} else {
		opts.SHA = github.Ptr(baseSHA)
		res, _, err = f.client.gh.Repositories.UpdateFile(ctx, f.repo.Owner, f.repo.Name, f.path, opts)
	}
	if err != nil {
		switch code := status(err); {
		case code == http.StatusConflict,
			// A create that meets a file GitHub refuses with 422 "sha wasn't supplied".
			code == http.StatusUnprocessableEntity && baseSHA == "":
			return Content{}, &ConflictError{Path: f.String(), SHA: baseSHA, Message: reason(err)}
		case code == http.StatusNotFound:
			return Content{}, fmt.Errorf("write %s: %w", f, ErrNotFound)
		}
		return Content{}, fmt.Errorf("write %s: %w", f, err)
	}
	sha := ""
	if res != nil && res.Content != nil {
		sha = res.Content.GetSHA()
	}
	return Content{Data: data, SHA: sha}, nil
}

func status(err error) int {
	var e *github.ErrorResponse
	if errors.As(err, &e) && e.Response != nil {
		return e.Response.StatusCode
	}
	return 0
}

func reason(err error) string {
	var e *github.ErrorResponse
	if errors.As(err, &e) && e.Message != "" {
		return e.Message
	}
	return err.Error()
}
