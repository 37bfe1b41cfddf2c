package docs_test

import (
	"bufio"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// TestLinks holds every relative link of the project's pages (README.md and
// DEVELOPMENT.md at the root, docs/*.md) to a file that exists and, for a
// link into a Markdown file, to a heading that file has.
func TestLinks(t *testing.T) {
	checked, problems, err := checkLinks("..")
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no relative link found: the walk read no page")
	}
	t.Logf("%d relative links checked", checked)
	for _, p := range problems {
		t.Error(p)
	}
}

// TestLinksCatchDeadOnes proves the check fails where it should: a link to a
// file that is not there, and one to a heading that is not there.
func TestLinksCatchDeadOnes(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "README.md"), strings.Join([]string{
		"# Project",
		"",
		"See [the page](docs/page.md), [its part](docs/page.md#a-part-b), [here](#project),",
		"[the folder](docs/) and [the web](https://example.com/missing.md).",
		"A [dead file](docs/gone.md) and a [dead anchor](docs/page.md#no-such-part).",
		"",
	}, "\n"))
	write(t, filepath.Join(root, "DEVELOPMENT.md"), "# Development\n\n[Back](README.md#project), [self](#nowhere)\n")
	write(t, filepath.Join(root, "docs", "page.md"), strings.Join([]string{
		"# Page",
		"",
		"## A part (`b`)",
		"",
		"```sh",
		"# not a heading",
		"echo [not](a-link.md)",
		"```",
		"",
		"[Up](../README.md), [not a heading](#not-a-heading).",
		"",
	}, "\n"))

	checked, problems, err := checkLinks(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"DEVELOPMENT.md: #nowhere: no heading nowhere in DEVELOPMENT.md",
		"README.md: docs/gone.md: no file docs/gone.md",
		"README.md: docs/page.md#no-such-part: no heading no-such-part in docs/page.md",
		"docs/page.md: #not-a-heading: no heading not-a-heading in docs/page.md",
	}
	if !slices.Equal(problems, want) {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
	if checked != 10 {
		t.Fatalf("checked %d links, want 10", checked)
	}
}

func TestAnchor(t *testing.T) {
	for text, want := range map[string]string{
		"The template a yes starts (`/may-start`)":     "the-template-a-yes-starts-may-start",
		"1. Records what serves":                       "1-records-what-serves",
		"Which Deployment is a unit's":                 "which-deployment-is-a-units",
		"`POST /may-promote` (confirm-promotion)":      "post-may-promote-confirm-promotion",
		"Reference documents, and the tests that skip": "reference-documents-and-the-tests-that-skip",
		"snake_case and UPPER":                         "snake_case-and-upper",
	} {
		if got := anchor(text); got != want {
			t.Errorf("anchor(%q) = %q, want %q", text, got, want)
		}
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// pages are the Markdown files under root whose links are checked.
func pages(root string) ([]string, error) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	out := []string{filepath.Join(root, "README.md"), filepath.Join(root, "DEVELOPMENT.md")}
	return append(out, docs...), nil
}

// checkLinks reads every page under root and returns how many relative links
// it checked and one line per link whose file or heading is not there, each
// naming the page relative to root.
func checkLinks(root string) (int, []string, error) {
	files, err := pages(root)
	if err != nil {
		return 0, nil, err
	}
	headings := map[string]map[string]bool{}
	headingsOf := func(path string) (map[string]bool, error) {
		if h, ok := headings[path]; ok {
			return h, nil
		}
		doc, err := read(path)
		if err != nil {
			return nil, err
		}
		headings[path] = doc.anchors
		return doc.anchors, nil
	}
	checked := 0
	var problems []string
	for _, page := range files {
		doc, err := read(page)
		if err != nil {
			return 0, nil, err
		}
		headings[page] = doc.anchors
		name := rel(root, page)
		for _, link := range doc.links {
			if external(link) {
				continue
			}
			checked++
			target, fragment, _ := strings.Cut(link, "#")
			target, err := url.PathUnescape(target)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %s: %v", name, link, err))
				continue
			}
			path := page
			if target != "" {
				path = filepath.Join(filepath.Dir(page), filepath.FromSlash(target))
			}
			if _, err := os.Stat(path); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %s: no file %s", name, link, rel(root, path)))
				continue
			}
			if fragment == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			anchors, err := headingsOf(path)
			if err != nil {
				return 0, nil, err
			}
			if !anchors[strings.ToLower(fragment)] {
				problems = append(problems, fmt.Sprintf("%s: %s: no heading %s in %s", name, link, fragment, rel(root, path)))
			}
		}
	}
	slices.Sort(problems)
	return checked, problems, nil
}

func rel(root, path string) string {
	r, err := filepath.Rel(root, path)
	if err != nil {
		return path
	}
	return filepath.ToSlash(r)
}

// external reports whether a link leaves the repository: a URL with a scheme.
func external(link string) bool {
	u, err := url.Parse(link)
	return err == nil && u.Scheme != ""
}

// document is what a page holds that links need: its links' targets in the
// order they appear, and the anchors of its headings.
type document struct {
	links   []string
	anchors map[string]bool
}

var (
	// inlineLink is [text](target) or [text](target "title"); the text may
	// hold code spans and one level of brackets.
	inlineLink = regexp.MustCompile(`\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(<?([^()\s<>]*)>?(?:\s+"[^"]*")?\)`)
	// referenceLink is a reference definition: [label]: target.
	referenceLink = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	heading       = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$`)
	fence         = regexp.MustCompile("^ {0,3}(```|~~~)")
)

// read parses a page line by line, leaving out fenced code blocks, where
// neither links nor headings are.
func read(path string) (document, error) {
	f, err := os.Open(path) //nolint:gosec // a page of this repository
	if err != nil {
		return document{}, err
	}
	defer f.Close()
	doc := document{anchors: map[string]bool{}}
	seen := map[string]int{}
	inFence := ""
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for scanner.Scan() {
		line := scanner.Text()
		if m := fence.FindStringSubmatch(line); m != nil {
			switch inFence {
			case "":
				inFence = m[1]
			case m[1]:
				inFence = ""
			}
			continue
		}
		if inFence != "" {
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			a := anchor(m[2])
			// GitHub numbers a repeated anchor: a, a-1, a-2.
			if n := seen[a]; n > 0 {
				seen[a] = n + 1
				a = fmt.Sprintf("%s-%d", a, n)
			} else {
				seen[a] = 1
			}
			doc.anchors[a] = true
		}
		if m := referenceLink.FindStringSubmatch(line); m != nil {
			doc.links = append(doc.links, m[1])
			continue
		}
		for _, m := range inlineLink.FindAllStringSubmatch(withoutCode(line), -1) {
			doc.links = append(doc.links, m[1])
		}
	}
	return doc, scanner.Err()
}

// codeSpan is an inline code span.
var codeSpan = regexp.MustCompile("`[^`]*`")

// withoutCode blanks the code spans of a line, so that code which looks like
// a link is not read as one. A link whose text is a code span still reads:
// its brackets and target stay.
func withoutCode(line string) string {
	return codeSpan.ReplaceAllStringFunc(line, func(span string) string {
		return strings.Repeat(" ", len(span))
	})
}

// anchor is the id GitHub gives a heading: its text lower-cased, markup and
// punctuation dropped (letters, digits, '-' and '_' kept), each space a '-'.
func anchor(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
