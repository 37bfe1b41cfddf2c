package backup

import (
	"bytes"
	"crypto/sha256"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseDestination(t *testing.T) {
	cases := []struct {
		raw, path string
		want      Destination
		err       string
	}{
		{"s3://backup-storage", "apps/data", Destination{"backup-storage", "apps/data"}, ""},
		{"s3://backup-storage/jorisjonkers-dev", "platform-postgres", Destination{"backup-storage", "jorisjonkers-dev/platform-postgres"}, ""},
		{"s3://backup-storage/a/b/", "/c/", Destination{"backup-storage", "a/b/c"}, ""},
		{"s3://backup-storage", "", Destination{}, "no path"},
		{"https://backup-storage", "x", Destination{}, "not s3://"},
		{"backup-storage", "x", Destination{}, "not s3://"},
		{"s3://Backup_Storage", "x", Destination{}, "not a bucket"},
		{"s3://b", "x", Destination{}, "not a bucket"},
		{"s3://backup-storage/a/../b", "x", Destination{}, "segment"},
		{"s3://backup-storage/a b", "x", Destination{}, "segment"},
		{"s3://backup-storage", "a//b", Destination{}, "segment"},
		{"s3://backup-storage", "..", Destination{}, "segment"},
		{"s3://user:pw@backup-storage", "x", Destination{}, "not s3://"},
		{"s3://backup-storage?x=1", "x", Destination{}, "not s3://"},
		{"s3://backup-storage:9000", "x", Destination{}, "not s3://"},
	}
	for _, c := range cases {
		got, err := ParseDestination(c.raw, c.path)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseDestination(%q, %q) = %v, want an error naming %q", c.raw, c.path, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseDestination(%q, %q) = %+v, %v", c.raw, c.path, got, err)
		}
	}
	d := Destination{"b", "x/y"}
	if k := d.Key("files-20261026T031500Z.tar.gz"); k != "x/y/files-20261026T031500Z.tar.gz.age" {
		t.Errorf("key %q", k)
	}
	if d.String() != "s3://b/x/y" {
		t.Errorf("string %q", d.String())
	}
}

func TestParseRecipient(t *testing.T) {
	if _, err := ParseRecipient("age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"); err != nil {
		t.Fatal(err)
	}
	identity := "AGE-SECRET-KEY-1GFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPQ4EGAEX"
	keygenFile := "# created: 2026-11-30T10:00:00Z\n# public key: age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p\n" + identity
	for _, bad := range []string{"", "ssh-ed25519 AAAA", "age1short", "AGE-SECRET-KEY-1QQQ", identity, strings.ToLower(identity), keygenFile} {
		_, err := ParseRecipient(bad)
		if err == nil {
			t.Errorf("%q accepted", bad)
			continue
		}
		// The error is logged: it must never carry what was handed in.
		if secret := strings.ToUpper(strings.TrimSpace(bad)); len(secret) > 10 && strings.Contains(strings.ToUpper(err.Error()), secret[len(secret)-10:]) {
			t.Errorf("the error for %q carries the value: %v", bad, err)
		}
	}
}

func TestPlanParts(t *testing.T) {
	cases := []struct {
		size, configured, want int64
		err                    bool
	}{
		{100, MinPartSize, MinPartSize, false},
		{64 << 30, DefaultPartSize, DefaultPartSize, false},
		// 6 TiB at 64 MiB would be 98,304 parts: the part grows to fit 10,000.
		{6 << 40, DefaultPartSize, 630 << 20, false},
		{1, MinPartSize - 1, 0, true},
		{1, MaxPartSize + 1, 0, true},
		{60 << 40, DefaultPartSize, 0, true},
	}
	for _, c := range cases {
		got, err := PlanParts(c.size, c.configured)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("PlanParts(%d, %d) = %d, %v", c.size, c.configured, got, err)
		}
		if err == nil && (c.size+got-1)/got > maxPartCount {
			t.Errorf("PlanParts(%d) needs more than %d parts", c.size, maxPartCount)
		}
	}
}

func sumsOf(b []byte) Sums {
	s := sha256.Sum256(b)
	return Sums{SHA256: s[:]}
}

func TestVerifyStored(t *testing.T) {
	whole := sumsOf([]byte("whole"))
	parts := []Part{{Number: 1, Size: 5, Sums: sumsOf([]byte("one"))}, {Number: 2, Size: 3, Sums: sumsOf([]byte("two"))}}
	storedParts := []StoredPart{{1, 5, parts[0].Sums.SHA256Base64()}, {2, 3, parts[1].Sums.SHA256Base64()}}
	composite := CompositeChecksum(parts)
	if !strings.HasSuffix(composite, "-2") {
		t.Fatalf("composite %q", composite)
	}
	cases := []struct {
		name  string
		got   Stored
		parts []Part
		err   string
	}{
		{"one PUT that matches", Stored{Size: 8, ChecksumSHA256: whole.SHA256Base64()}, nil, ""},
		{"a size that differs", Stored{Size: 7, ChecksumSHA256: whole.SHA256Base64()}, nil, "7 bytes"},
		{"a checksum that differs", Stored{Size: 8, ChecksumSHA256: sumsOf([]byte("other")).SHA256Base64()}, nil, "checksum is"},
		{"no checksum confirmed", Stored{Size: 8}, nil, "no SHA-256"},
		{"multipart that matches", Stored{Size: 8, ChecksumSHA256: composite, Parts: storedParts}, parts, ""},
		{"a composite that differs", Stored{Size: 8, ChecksumSHA256: whole.SHA256Base64() + "-2", Parts: storedParts}, parts, "checksum is"},
		{"a part missing", Stored{Size: 8, ChecksumSHA256: composite, Parts: storedParts[:1]}, parts, "1 parts"},
		{"a part's checksum differs", Stored{Size: 8, ChecksumSHA256: composite, Parts: []StoredPart{storedParts[0], {2, 3, whole.SHA256Base64()}}}, parts, "part 2"},
		{"a part's size differs", Stored{Size: 8, ChecksumSHA256: composite, Parts: []StoredPart{{1, 4, storedParts[0].ChecksumSHA256}, storedParts[1]}}, parts, "part 1"},
	}
	for _, c := range cases {
		err := VerifyStored(c.got, 8, whole, c.parts)
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func TestPruneCopies(t *testing.T) {
	now := time.Date(2026, 10, 26, 3, 0, 0, 0, time.UTC)
	names := []string{
		"files-20261024T024500Z.tar.gz.age", "files-20261025T024500Z.tar.gz.age", "files-20261026T024500Z.tar.gz.age",
		"postgres-20261020T024500Z.sql.gz.age", "files-20261020T024500Z.tar.gz", "notes.txt", ".partial-x",
		"rollback-rb-7-files-20261001T024500Z.tar.gz.age", // put there by hand, older than 7 days
	}
	got := PruneCopies(names, "files", 2, now, "files-20261026T024500Z.tar.gz")
	if want := []string{"files-20261024T024500Z.tar.gz.age"}; !slices.Equal(got, want) {
		t.Fatalf("pruned %q, want %q", got, want)
	}
	if got := PruneCopies(names, "postgres", 1, now, ""); len(got) != 0 {
		t.Fatalf("pruned the only postgres copy: %q", got)
	}
	// Written by this run under a clock stepped back: kept, and the copy
	// stamped later goes in its place.
	if got, want := PruneCopies(names, "files", 1, now, "files-20261024T024500Z.tar.gz"), []string{
		"files-20261025T024500Z.tar.gz.age", "files-20261026T024500Z.tar.gz.age"}; !slices.Equal(got, want) {
		t.Fatalf("pruned %q, want %q", got, want)
	}
	gens := CopyNames(names)
	if len(gens) != 5 || gens[0].Name() != "files-20261026T024500Z.tar.gz" || gens[3].Method != "postgres" {
		t.Fatalf("copy names %+v", gens)
	}
}

const goodDump = `--
-- PostgreSQL database cluster dump
--

SET default_transaction_read_only = off;
CREATE ROLE app;
COPY public.t (id, v) FROM stdin;
1	one
2	two
\.

--
-- PostgreSQL database cluster dump complete
--

`

// cutBefore is s up to the first sep, which must be there.
func cutBefore(s, sep string) string {
	head, _, found := strings.Cut(s, sep)
	if !found {
		panic("no " + sep)
	}
	return head
}

func TestCheckDump(t *testing.T) {
	if err := CheckDump(strings.NewReader(goodDump)); err != nil {
		t.Fatal(err)
	}
	long := strings.Replace(goodDump, "1\tone", "1\t"+strings.Repeat("x", 200<<10), 1)
	if err := CheckDump(strings.NewReader(long)); err != nil {
		t.Fatalf("a long row: %v", err)
	}
	cases := map[string]string{
		"no banner":          strings.Replace(goodDump, "-- PostgreSQL database cluster dump\n", "", 1),
		"cut short":          cutBefore(goodDump, "\\."),
		"cut after the COPY": cutBefore(goodDump, "--\n-- PostgreSQL database cluster dump complete"),
		"not a dump":         "<html>error</html>\n",
		"empty":              "",
	}
	for name, dump := range cases {
		if err := CheckDump(strings.NewReader(dump)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzCheckDump(f *testing.F) {
	f.Add([]byte(goodDump))
	f.Add([]byte("--\n-- PostgreSQL database cluster dump\nCOPY x FROM stdin;\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		err := CheckDump(bytes.NewReader(b))
		if err == nil && !bytes.Contains(b, dumpTail) {
			t.Fatal("accepted a dump without its closing banner")
		}
	})
}

func FuzzParseDestination(f *testing.F) {
	f.Add("s3://backup-storage/jorisjonkers-dev", "apps/data")
	f.Add("s3://b/../x", "y")
	f.Add("s3://bucket", "")
	f.Fuzz(func(t *testing.T, raw, path string) {
		d, err := ParseDestination(raw, path)
		if err != nil {
			return
		}
		key := d.Key("files-20261026T031500Z.tar.gz")
		if strings.Contains(key, "..") || strings.HasPrefix(key, "/") || strings.Contains(key, "//") {
			t.Fatalf("key %q from %q, %q", key, raw, path)
		}
		if !bucketPattern.MatchString(d.Bucket) {
			t.Fatalf("bucket %q", d.Bucket)
		}
	})
}

// A URL refused for holding a password is quoted without it.
func TestRefusedURLsHideTheirPassword(t *testing.T) {
	if _, err := ParseDestination("s3://key:hunter2secret@backup-storage", "x"); err == nil || strings.Contains(err.Error(), "hunter2secret") {
		t.Errorf("ParseDestination: %v", err)
	}
	for _, endpoint := range []string{"https://key:hunter2secret@s3.example", "https://key:hunter2secret@s3.example/%zz"} {
		_, err := NewS3Store(S3Settings{Endpoint: endpoint, AccessKey: "k", SecretKey: "s", Region: "us-east-1", Bucket: "backups"})
		if err == nil || strings.Contains(err.Error(), "hunter2secret") {
			t.Errorf("NewS3Store(%s): %v", endpoint, err)
		}
	}
}
