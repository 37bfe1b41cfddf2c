package owntraffic

import (
	"net"
	"net/http"
	"testing"
	"time"
)

func TestProtected(t *testing.T) {
	target := newMember(t, byPath(nil))
	slow := slowHandler(2 * time.Second)
	m := newMember(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/open":
			_, _ = w.Write([]byte("secret"))
		case "/guarded":
			w.WriteHeader(http.StatusUnauthorized)
		case "/sign-in":
			http.Redirect(w, r, target.srv.URL+"/login", http.StatusFound)
		case "/slow":
			slow(w, r)
		default:
			http.NotFound(w, r)
		}
	})
	p := m.sender(WithRequestTimeout(100 * time.Millisecond))
	cases := []struct {
		path   string
		pass   bool
		reason string
	}{
		{"/open", false, "E_CLIENT_OPEN: shop-api serves /open to anyone"},
		{"/guarded", true, "shop-api answers /guarded with 401"},
		{"/sign-in", true, "shop-api answers /sign-in with 302"},
		{"/missing", true, "shop-api answers /missing with 404"},
		{"/slow", false, "shop-api did not answer /slow (no answer within 100ms), so it is not shown protected"},
	}
	for _, c := range cases {
		v, err := p.Protected(t.Context(), m.base(t), "shop-api", c.path)
		if err != nil {
			t.Fatal(err)
		}
		if v.Pass != c.pass || v.Reason != c.reason {
			t.Errorf("Protected(%s) = %+v, want pass=%v %q", c.path, v, c.pass, c.reason)
		}
		if got := m.count(c.path); got != 1 {
			t.Errorf("%s requested %d times, want once", c.path, got)
		}
	}
	if target.total() != 0 {
		t.Errorf("the sign-in redirect was followed: %v", target.hits)
	}
	for _, h := range m.seenHeaders() {
		if len(h.Values("Authorization")) > 0 || len(h.Values("Cookie")) > 0 {
			t.Errorf("the request carried credentials: %v", h)
		}
	}
}

func TestProtectedHoldsWithoutAnAnswer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	base, _ := CanaryBase("shop-api", "shop", 8080)
	v, err := New(WithDial(clusterDial(addr))).Protected(t.Context(), base, "shop-api", "/admin")
	if err != nil {
		t.Fatal(err)
	}
	if v.Pass || v.Reason != "shop-api did not answer /admin (connection refused), so it is not shown protected" {
		t.Errorf("verdict %+v", v)
	}
}
