package owntraffic

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxPathLength bounds one requested path; a route path longer than this is
// not one a platform renders.
const MaxPathLength = 1024

// CheckPath reports whether p may be requested: URL path segments, each opened
// by exactly one "/". Only RFC 3986 path characters are allowed, so a scheme,
// host, query, fragment, space or control character cannot appear; "." and
// ".." segments, ";" (path parameters, which some servers strip before
// resolving "..;"), backslashes and percent-encodings of "/", "\", ".", "%",
// ";" or a control character are refused because a server may decode them
// into a path other than the one checked. A trailing "/" (an empty last
// segment) is allowed: "/" and "/app/" are paths a readiness probe or Route
// names.
func CheckPath(p string) error {
	switch {
	case p == "":
		return errors.New("path is empty")
	case len(p) > MaxPathLength:
		return fmt.Errorf("path is longer than %d bytes", MaxPathLength)
	case p[0] != '/':
		return fmt.Errorf("path %q does not start with /", p)
	}
	segments := strings.Split(p[1:], "/")
	for i, seg := range segments {
		if seg == "" && i < len(segments)-1 {
			return fmt.Errorf("path %q has an empty segment (//)", p)
		}
		if seg == "." || seg == ".." {
			return fmt.Errorf("path %q has a %q segment", p, seg)
		}
		if err := checkSegment(seg); err != nil {
			return fmt.Errorf("path %q: %w", p, err)
		}
	}
	return nil
}

func checkSegment(seg string) error {
	var decoded []byte
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if c == '%' {
			if i+2 >= len(seg) || !isHex(seg[i+1]) || !isHex(seg[i+2]) {
				return errors.New("malformed percent-encoding")
			}
			d := unhex(seg[i+1])<<4 | unhex(seg[i+2])
			if hiddenRune(rune(d)) {
				return fmt.Errorf("percent-encoded %q is refused", string(rune(d)))
			}
			decoded = append(decoded, d)
			i += 2
			continue
		}
		if !pathChar(c) {
			return fmt.Errorf("character %q is not allowed in a path", string(rune(c)))
		}
		decoded = append(decoded, c)
	}
	return checkDecoded(decoded)
}

// checkDecoded refuses a segment whose encoded bytes a server could decode
// into a separator after all: bytes that are no valid UTF-8 (an overlong
// "/" or "." among them), and characters whose compatibility form holds one
// (a fullwidth solidus or full stop).
func checkDecoded(seg []byte) error {
	if !utf8.Valid(seg) {
		return errors.New("percent-encoded bytes that are no valid UTF-8 are refused")
	}
	for _, r := range string(seg) {
		if r < utf8.RuneSelf {
			continue
		}
		folded := norm.NFKC.String(string(r))
		if strings.ContainsFunc(folded, hiddenRune) {
			return fmt.Errorf("percent-encoded %q, read as %q, is refused", string(r), folded)
		}
	}
	return nil
}

// pathChar is RFC 3986's pchar without the percent sign (handled apart) and
// without ";".
func pathChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()*+,=:@", c) >= 0
}

// hiddenRune is a character that, once a server decodes it, could change which
// path is served.
func hiddenRune(r rune) bool {
	return r < 0x20 || r == 0x7f || strings.ContainsRune(`/\.%;`, r)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// CheckHost reports whether h may be warmed: a lowercase DNS name of at least
// two labels, without a port, a trailing dot, a wildcard or the shape of an IP
// address. The gate resolves it itself and decides on the address.
func CheckHost(h string) error {
	if errs := validation.IsDNS1123Subdomain(h); len(errs) > 0 {
		return fmt.Errorf("host %q is not a DNS name: %s", h, strings.Join(errs, "; "))
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return fmt.Errorf("host %q is an address, not a name", h)
	}
	labels := strings.Split(h, ".")
	if len(labels) < 2 {
		return fmt.Errorf("host %q is a single label", h)
	}
	for _, l := range labels {
		if len(l) > validation.DNS1123LabelMaxLength {
			return fmt.Errorf("host %q has a label longer than %d", h, validation.DNS1123LabelMaxLength)
		}
	}
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return fmt.Errorf("host %q ends in a numeric label", h)
	}
	return nil
}
