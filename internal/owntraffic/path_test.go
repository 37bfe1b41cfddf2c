package owntraffic

import (
	"net/netip"
	"net/url"
	"path"
	"strings"
	"testing"
)

func TestCheckPath(t *testing.T) {
	cases := []struct {
		path string
		ok   bool
	}{
		// URL path segments, each opened by exactly one "/".
		{"/", true},
		{"/api/actuator/health/readiness", true},
		{"/app/", true},
		{"/v1/orders/42", true},
		{"/a-b_c.d~e", true},
		{"/sign-in/@me:profile", true},
		{"/search/a+b,c=d&e!$'()*", true},
		{"/caf%C3%A9", true},
		{"/files/my%20report", true},
		{"/q%3Fx", true},
		{"/.well-known/openid-configuration", true},
		{"/..hidden", true},
		// no "//"
		{"//", false},
		{"//evil.example.com/", false},
		{"/a//b", false},
		{"/a/b//", false},
		// no ".." or "." segment
		{"/..", false},
		{"/../etc/passwd", false},
		{"/a/../b", false},
		{"/a/..", false},
		{"/.", false},
		{"/a/./b", false},
		// no scheme or host
		{"http://evil.example.com/", false},
		{"https:/x", false},
		{"evil.example.com/x", false},
		{"api", false},
		{"", false},
		// no query or fragment
		{"/a?b=c", false},
		{"/a?", false},
		{"/a#top", false},
		// no space or control character
		{"/a b", false},
		{"/a\tb", false},
		{"/a\nb", false},
		{"/a\rb", false},
		{"/a\x00", false},
		{"/a\x7f", false},
		{"/caf\u00e9", false},
		// no percent-encoded trickery
		{"/%2e%2e/admin", false},
		{"/%2E%2E/admin", false},
		{"/a%2Fb", false},
		{"/a%2fb", false},
		{"/a%5Cb", false},
		{"/a%00", false},
		{"/a%0d%0aHost:x", false},
		{"/a%252e%252e", false},
		{"/a%3B", false},
		{"/a%", false},
		{"/a%2", false},
		// nor encoded bytes a server may read as a separator after all
		{"/%C0%AE%C0%AE/admin", false},   // overlong "."
		{"/a%C0%AFb", false},             // overlong "/"
		{"/a%EF%BC%8Fb", false},          // fullwidth solidus
		{"/%EF%BC%8E%EF%BC%8E/x", false}, // fullwidth full stop
		{"/a%FF", false},
		{"/na%C3%AFve/%E2%9C%93", true},
		{"/a%zz", false},
		// no path parameters or backslashes
		{"/..;/admin", false},
		{"/a;jsessionid=1", false},
		{`/a\..\b`, false},
		{`/\evil.example.com`, false},
		// nor other characters outside a path
		{"/a<b>", false},
		{`/a"b`, false},
		{"/a[0]", false},
		{"/a{b}", false},
		{"/a|b", false},
		{"/a^b", false},
		{"/a`b", false},
		{"/" + strings.Repeat("a", MaxPathLength), false},
		{"/" + strings.Repeat("a", MaxPathLength-1), true},
	}
	for _, c := range cases {
		err := CheckPath(c.path)
		if (err == nil) != c.ok {
			t.Errorf("CheckPath(%q) = %v, want ok=%v", c.path, err, c.ok)
		}
	}
}

// FuzzCheckPath holds every accepted path to what the check promises: it
// stays the path of the gate's own origin, carries no query or fragment, and
// decodes to a path that nothing resolves elsewhere.
func FuzzCheckPath(f *testing.F) {
	for _, seed := range []string{
		"/", "/api/health", "/app/", "//x", "/../x", "/%2e%2e/", "/a?b", "/a#b", "http://x/",
		"/a b", "/a\x00", "/..;/x", "/a%2Fb", "/caf%C3%A9", `/a\b`, "/a/./b", "/@x:y",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if CheckPath(p) != nil {
			return
		}
		u, err := url.Parse("http://member.test" + p)
		if err != nil {
			t.Fatalf("accepted %q does not parse: %v", p, err)
		}
		if u.Host != "member.test" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.User != nil {
			t.Fatalf("accepted %q leaves the path: %#v", p, u)
		}
		if u.EscapedPath() != p {
			t.Fatalf("accepted %q is sent as %q", p, u.EscapedPath())
		}
		if strings.Contains(u.Path, "//") || strings.ContainsAny(u.Path, "\\;") {
			t.Fatalf("accepted %q decodes to %q", p, u.Path)
		}
		want := u.Path
		if want != "/" {
			want = strings.TrimSuffix(want, "/")
		}
		if path.Clean(u.Path) != want {
			t.Fatalf("accepted %q decodes to %q, which resolves to %q", p, u.Path, path.Clean(u.Path))
		}
	})
}

func TestCheckHost(t *testing.T) {
	cases := []struct {
		host string
		ok   bool
	}{
		{"shop.example.com", true},
		{"a.b", true},
		{"xn--caf-dma.example", true},
		{"localhost", false},
		{"", false},
		{"shop.example.com.", false},
		{"Shop.example.com", false},
		{"*.example.com", false},
		{"shop.example.com:443", false},
		{"10.0.0.1", false},
		{"1.2.3.4.5", false},
		{"::1", false},
		{"[::1]", false},
		{"-shop.example.com", false},
		{"shop..example.com", false},
		{"shop.example.com/x", false},
		{"user@shop.example.com", false},
		{"shop example.com", false},
		{strings.Repeat("a", 64) + ".example.com", false},
		{strings.Repeat("a", 63) + ".example.com", true},
	}
	for _, c := range cases {
		err := CheckHost(c.host)
		if (err == nil) != c.ok {
			t.Errorf("CheckHost(%q) = %v, want ok=%v", c.host, err, c.ok)
		}
	}
}

// FuzzCheckHost holds every accepted host to a name the gate resolves itself:
// never an address, a port or anything but a DNS name's characters.
func FuzzCheckHost(f *testing.F) {
	for _, seed := range []string{"shop.example.com", "10.0.0.1", "x.y:443", "*.a.b", "a..b", "LOCAL.host", "a.1"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, h string) {
		if CheckHost(h) != nil {
			return
		}
		if strings.Trim(h, "abcdefghijklmnopqrstuvwxyz0123456789.-") != "" {
			t.Fatalf("accepted %q has other characters", h)
		}
		if _, err := netip.ParseAddr(h); err == nil {
			t.Fatalf("accepted address %q", h)
		}
		u, err := url.Parse("https://" + h + "/")
		if err != nil || u.Hostname() != h || u.Port() != "" {
			t.Fatalf("accepted %q is not the URL's host: %v %#v", h, err, u)
		}
	})
}
