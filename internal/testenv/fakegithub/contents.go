package fakegithub

import (
	"crypto/sha1" //nolint:gosec // git names blobs by SHA-1; the fake must hand out the same ids
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// maxInlineContent is the largest file the contents API returns inline; above
// it GitHub answers encoding "none" and an empty content, and the blob must be
// read from the git data API.
const maxInlineContent = 1 << 20

type repository struct {
	defaultBranch string
	files         map[string][]byte
	commits       []Commit
	deployments   []*deployment
	archived      bool
}

// Commit is one commit the fake recorded on a repository.
type Commit struct {
	SHA     string
	Message string
	Path    string
	// BlobSHA and Content are the file as this commit left it.
	BlobSHA string
	Content []byte
	// Committer is who committed: "api" for a contents API write, "seed" for PutFile.
	Committer string
}

// BlobSHA is git's object id of a blob: sha1("blob <len>\x00" + content).
func BlobSHA(content []byte) string {
	h := sha1.New() //nolint:gosec // see the import
	fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))
}

// AddRepository creates owner/name with default branch main, empty, and
// lets the installation reach it. Adding it again changes nothing.
func (s *Server) AddRepository(fullName string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.repos[fullName]; !ok {
		s.repos[fullName] = &repository{defaultBranch: "main", files: map[string][]byte{}}
	}
}

// PutFile commits content at path directly, as another writer would; it
// returns the new blob sha. The repository is created when missing.
func (s *Server) PutFile(fullName, path string, content []byte) string {
	s.AddRepository(fullName)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.repos[fullName].commit(path, content, "edit "+path, "seed")
}

// File returns a file's content and blob sha, and whether it exists.
func (s *Server) File(fullName, path string) ([]byte, string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, ok := s.repos[fullName]
	if !ok {
		return nil, "", false
	}
	content, ok := repo.files[path]
	if !ok {
		return nil, "", false
	}
	return append([]byte(nil), content...), BlobSHA(content), true
}

// Commits lists the commits on a repository, oldest first.
func (s *Server) Commits(fullName string) []Commit {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, ok := s.repos[fullName]
	if !ok {
		return nil
	}
	return append([]Commit(nil), repo.commits...)
}

func (r *repository) commit(path string, content []byte, message, committer string) string {
	stored := append([]byte(nil), content...)
	r.files[path] = stored
	blob := BlobSHA(stored)
	h := sha1.New() //nolint:gosec // see the import
	fmt.Fprintf(h, "%d\x00%s\x00%s\x00%s", len(r.commits), path, blob, message)
	r.commits = append(r.commits, Commit{
		SHA: hex.EncodeToString(h.Sum(nil)), Message: message, Path: path,
		BlobSHA: blob, Content: stored, Committer: committer,
	})
	return blob
}

// lookup finds the repository a route names and the branch a ref names; it
// answers 404 itself for either missing, as GitHub does for a repository the
// installation cannot see.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request, ref string) (*repository, bool) {
	repo, ok := s.repos[r.PathValue("owner")+"/"+r.PathValue("repo")]
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found")
		return nil, false
	}
	if ref != "" && ref != repo.defaultBranch && ref != "heads/"+repo.defaultBranch && ref != "refs/heads/"+repo.defaultBranch {
		writeError(w, http.StatusNotFound, "No commit found for the ref "+ref)
		return nil, false
	}
	return repo, true
}

// contentEntry is a file or directory entry of the contents API.
type contentEntry struct {
	Type        string            `json:"type"`
	Encoding    string            `json:"encoding,omitempty"`
	Size        int               `json:"size"`
	Name        string            `json:"name"`
	Path        string            `json:"path"`
	Content     *string           `json:"content,omitempty"`
	SHA         string            `json:"sha"`
	URL         string            `json:"url"`
	GitURL      string            `json:"git_url"`
	HTMLURL     string            `json:"html_url"`
	DownloadURL *string           `json:"download_url"`
	Links       map[string]string `json:"_links"`
}

func (s *Server) entry(r *http.Request, path string, content []byte, withContent bool) contentEntry {
	base := "http://" + r.Host
	full := r.PathValue("owner") + "/" + r.PathValue("repo")
	sha := BlobSHA(content)
	name := path[strings.LastIndex(path, "/")+1:]
	e := contentEntry{
		Type: "file", Size: len(content), Name: name, Path: path, SHA: sha,
		URL:     base + "/repos/" + full + "/contents/" + path,
		GitURL:  base + "/repos/" + full + "/git/blobs/" + sha,
		HTMLURL: base + "/" + full + "/blob/main/" + path,
	}
	download := base + "/raw/" + full + "/main/" + path
	e.DownloadURL = &download
	e.Links = map[string]string{"self": e.URL, "git": e.GitURL, "html": e.HTMLURL}
	if withContent {
		encoded, encoding := "", "none"
		if len(content) <= maxInlineContent {
			encoded, encoding = wrapBase64(content), "base64"
		}
		e.Content, e.Encoding = &encoded, encoding
	}
	return e
}

// dirEntry is a directory's entry in its parent's listing. GitHub names it by
// its tree's id; the fake keeps no trees, so it names it by its path, and
// like GitHub gives it no download address.
func (s *Server) dirEntry(r *http.Request, path string) contentEntry {
	base := "http://" + r.Host
	full := r.PathValue("owner") + "/" + r.PathValue("repo")
	h := sha1.Sum([]byte("tree " + path)) //nolint:gosec // see the import
	sha := hex.EncodeToString(h[:])
	e := contentEntry{
		Type: "dir", Name: path[strings.LastIndex(path, "/")+1:], Path: path, SHA: sha,
		URL:     base + "/repos/" + full + "/contents/" + path,
		GitURL:  base + "/repos/" + full + "/git/trees/" + sha,
		HTMLURL: base + "/" + full + "/tree/main/" + path,
	}
	e.Links = map[string]string{"self": e.URL, "git": e.GitURL, "html": e.HTMLURL}
	return e
}

// wrapBase64 encodes as GitHub does in the contents API: standard base64 in
// lines of 60 characters, each ended by a newline.
func wrapBase64(content []byte) string {
	enc := base64.StdEncoding.EncodeToString(content)
	var b strings.Builder
	for len(enc) > 60 {
		b.WriteString(enc[:60])
		b.WriteByte('\n')
		enc = enc[60:]
	}
	if enc != "" {
		b.WriteString(enc)
		b.WriteByte('\n')
	}
	return b.String()
}

func (s *Server) getContents(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, ok := s.lookup(w, r, r.URL.Query().Get("ref"))
	if !ok {
		return
	}
	path := strings.Trim(r.PathValue("path"), "/")
	if content, ok := repo.files[path]; ok {
		writeCacheable(w, r, s.entry(r, path, content, true))
		return
	}
	// A directory answers an array of its entries.
	prefix := path + "/"
	if path == "" {
		prefix = ""
	}
	var entries []contentEntry
	dirs := map[string]bool{}
	for p, content := range repo.files {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok {
			continue
		}
		if dir, _, nested := strings.Cut(rest, "/"); nested {
			if !dirs[dir] {
				dirs[dir] = true
				entries = append(entries, s.dirEntry(r, prefix+dir))
			}
			continue
		}
		entries = append(entries, s.entry(r, p, content, false))
	}
	if entries == nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Path < entries[j].Path })
	writeCacheable(w, r, entries)
}

// putRequest is the body of PUT /repos/{owner}/{repo}/contents/{path}.
type putRequest struct {
	Message   *string         `json:"message"`
	Content   *string         `json:"content"`
	SHA       string          `json:"sha"`
	Branch    string          `json:"branch"`
	Committer json.RawMessage `json:"committer"`
	Author    json.RawMessage `json:"author"`
}

// commitBody is the commit object of a contents write's answer.
type commitBody struct {
	SHA     string `json:"sha"`
	NodeID  string `json:"node_id"`
	URL     string `json:"url"`
	HTMLURL string `json:"html_url"`
	Message string `json:"message"`
	Tree    struct {
		SHA string `json:"sha"`
	} `json:"tree"`
	Parents []struct {
		SHA string `json:"sha"`
	} `json:"parents"`
}

func (s *Server) putContents(w http.ResponseWriter, r *http.Request) {
	var req putRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 100<<20))
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	if req.Message == nil || req.Content == nil {
		writeError(w, http.StatusUnprocessableEntity, "Invalid request.\n\n\"message\" and \"content\" are required.")
		return
	}
	content, err := base64.StdEncoding.DecodeString(*req.Content)
	if err != nil {
		// The schema says only "string"; GitHub refuses what is not Base64.
		s.violate(fmt.Errorf("request %s %s: content is not Base64: %w", r.Method, r.URL.Path, err))
		writeError(w, http.StatusUnprocessableEntity, "content is not valid Base64")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, ok := s.lookup(w, r, req.Branch)
	if !ok {
		return
	}
	path := strings.Trim(r.PathValue("path"), "/")
	current, exists := repo.files[path]
	switch {
	case exists && req.SHA == "":
		writeError(w, http.StatusUnprocessableEntity, "Invalid request.\n\n\"sha\" wasn't supplied.")
		return
	case exists && req.SHA != BlobSHA(current):
		writeError(w, http.StatusConflict, fmt.Sprintf("%s does not match %s", path, req.SHA))
		return
	case !exists && req.SHA != "":
		// GitHub answers a sha for a file that is gone as a conflict too.
		writeError(w, http.StatusConflict, fmt.Sprintf("%s does not match %s", path, req.SHA))
		return
	}
	parent := ""
	if n := len(repo.commits); n > 0 {
		parent = repo.commits[n-1].SHA
	}
	repo.commit(path, content, *req.Message, "api")
	c := repo.commits[len(repo.commits)-1]
	body := commitBody{SHA: c.SHA, NodeID: "C_" + c.SHA[:12], Message: c.Message,
		URL:     "http://" + r.Host + "/repos/" + r.PathValue("owner") + "/" + r.PathValue("repo") + "/git/commits/" + c.SHA,
		HTMLURL: "http://" + r.Host + "/" + r.PathValue("owner") + "/" + r.PathValue("repo") + "/commit/" + c.SHA}
	body.Tree.SHA = c.SHA
	// GitHub writes a commit without parents as an empty list, not null.
	body.Parents = []struct {
		SHA string `json:"sha"`
	}{}
	if parent != "" {
		body.Parents = append(body.Parents, struct {
			SHA string `json:"sha"`
		}{parent})
	}
	status := http.StatusOK
	if !exists {
		status = http.StatusCreated
	}
	writeJSON(w, status, map[string]any{"content": s.entry(r, path, content, false), "commit": body})
}

// getBlob serves GET /repos/{owner}/{repo}/git/blobs/{sha}: raw bytes when the
// caller asks for the raw media type, GitHub's JSON object otherwise.
func (s *Server) getBlob(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, ok := s.lookup(w, r, "")
	if !ok {
		return
	}
	sha := r.PathValue("file_sha")
	var content []byte
	found := false
	for _, c := range repo.commits {
		if c.BlobSHA == sha {
			content, found = c.Content, true
			break
		}
	}
	if !found {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	if strings.Contains(r.Header.Get("Accept"), ".raw") {
		w.Header().Set("Content-Type", "application/vnd.github.raw")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(content)
		return
	}
	writeCacheable(w, r, map[string]any{
		"sha": sha, "size": len(content), "encoding": "base64", "content": wrapBase64(content),
		"url": "http://" + r.Host + r.URL.Path, "node_id": "B_" + sha[:12],
	})
}
