package vaultpolicy

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
)

// The kubelet lays a ConfigMap volume out as a timestamped folder holding the
// files, a "..data" link to that folder, and for each key a link
// "<key>" -> "..data/<key>"; an update swaps "..data" in one rename. The
// timestamped folder is named by time.Format("..2006_01_02_15_04_05.") plus
// os.MkdirTemp's random digits.
const dataLink = "..data"

var timestampDir = regexp.MustCompile(`^\.\.\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}\.\d+$`)

// ReadMount reads a render mounted as Kubernetes mounts a ConfigMap, and only
// that: anything else in the folder (a plain file, a link elsewhere, a key
// without its file, a file without its key, a folder) refuses the whole
// render. It returns each key's bytes; nothing is judged but the layout.
func ReadMount(dir string) (map[string][]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open the render: %w", err)
	}
	defer root.Close()

	top, err := readDirNames(root, ".")
	if err != nil {
		return nil, err
	}
	if !slices.Contains(top, dataLink) {
		return nil, fmt.Errorf("%s holds no %s link: not a mounted ConfigMap", dir, dataLink)
	}
	target, err := root.Readlink(dataLink)
	if err != nil {
		return nil, fmt.Errorf("%s is not a link: not a mounted ConfigMap", dataLink)
	}
	if !timestampDir.MatchString(target) {
		return nil, fmt.Errorf("%s points at %q, not a timestamped folder beside it", dataLink, target)
	}
	if info, err := root.Lstat(target); err != nil || !info.IsDir() {
		return nil, fmt.Errorf("%s points at %q, which is not a folder", dataLink, target)
	}

	var keys []string
	for _, name := range top {
		switch {
		case name == dataLink || name == target:
			continue
		case strings.HasPrefix(name, ".."):
			return nil, fmt.Errorf("%s: %q is not part of a settled ConfigMap mount", dir, name)
		}
		link, err := root.Readlink(name)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a key's link: not a mounted ConfigMap", dir, name)
		}
		if link != dataLink+"/"+name {
			return nil, fmt.Errorf("%s: %q points at %q, not %s/%s", dir, name, link, dataLink, name)
		}
		keys = append(keys, name)
	}

	files, err := readDirNames(root, target)
	if err != nil {
		return nil, err
	}
	if !slices.Equal(files, keys) {
		return nil, fmt.Errorf("%s: the keys %q and the files %q differ", dir, keys, files)
	}
	out := make(map[string][]byte, len(keys))
	for _, key := range keys {
		content, err := readDocument(root, target+"/"+key)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", key, err)
		}
		out[key] = content
	}
	return out, nil
}

func readDirNames(root *os.Root, dir string) ([]string, error) {
	f, err := root.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("open the render: %w", err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("list the render: %w", err)
	}
	slices.Sort(names)
	return names, nil
}

// readDocument reads a regular file of at most maxDocumentBytes.
func readDocument(root *os.Root, name string) ([]byte, error) {
	info, err := root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", info.Mode().Type())
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	content, err := io.ReadAll(io.LimitReader(f, maxDocumentBytes+1))
	if err != nil {
		return nil, err
	}
	if len(content) > maxDocumentBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxDocumentBytes)
	}
	return content, nil
}

// ErrRefused marks a render that is not applied; the run stops before Vault
// is touched.
var ErrRefused = errors.New("render refused")

// Load reads and checks the render mounted at dir, whole.
func Load(dir string) (Render, error) {
	files, err := ReadMount(dir)
	if err != nil {
		return Render{}, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	render, err := Decode(files)
	if err != nil {
		return Render{}, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return render, nil
}
