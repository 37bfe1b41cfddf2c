package settings

import (
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"
)

// Reader reads variables through getenv; a binary hands it os.Getenv and a
// test its own map.
type Reader struct {
	getenv func(string) string
	err    error
}

// New reads through getenv.
func New(getenv func(string) string) *Reader { return &Reader{getenv: getenv} }

// Err is the first problem met, naming its variable, or nil.
func (r *Reader) Err() error { return r.err }

func (r *Reader) fail(name, format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...))
	}
}

func (r *Reader) value(name string) string { return strings.TrimSpace(r.getenv(name)) }

// String is the variable's value, or def when it is unset or empty.
func (r *Reader) String(name, def string) string {
	if v := r.value(name); v != "" {
		return v
	}
	return def
}

// Address is a listen address, host:port with a port from 0 to 65535 and
// the host optional (":8080"), or def when unset: a wrong one stops the
// binary at start, not when it first listens.
func (r *Reader) Address(name, def string) string {
	v := r.String(name, def)
	_, port, err := net.SplitHostPort(v)
	if err == nil {
		if n, perr := strconv.ParseUint(port, 10, 16); perr != nil || strconv.FormatUint(n, 10) != port {
			err = fmt.Errorf("port %q is not a number from 0 to 65535", port)
		}
	}
	if err != nil {
		r.fail(name, "%q is not a listen address such as :8080 or 127.0.0.1:8080", v)
		return def
	}
	return v
}

// Required is the variable's value; an unset or empty one is an error.
func (r *Reader) Required(name string) string {
	v := r.value(name)
	if v == "" {
		r.fail(name, "required but not set")
	}
	return v
}

// Duration is a positive Go duration ("30s", "10m"), or def when unset.
func (r *Reader) Duration(name string, def time.Duration) time.Duration {
	v := r.value(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		r.fail(name, "%q is not a positive duration such as 30s or 10m", v)
		return def
	}
	return d
}

// Share is a number from 0 to 1 ("0.01" for one in a hundred), or def when
// unset.
func (r *Reader) Share(name string, def float64) float64 {
	v := r.value(name)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > 1 {
		r.fail(name, "%q is not a share from 0 to 1 such as 0.01", v)
		return def
	}
	return f
}

// PositiveInt is a whole number of at least 1, or def when unset and def > 0.
// With def 0 the variable is required.
func (r *Reader) PositiveInt(name string, def int) int {
	v := r.value(name)
	if v == "" {
		if def <= 0 {
			r.fail(name, "required but not set")
		}
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		r.fail(name, "%q is not a positive whole number", v)
		return def
	}
	return n
}

// Int64 is a positive 64-bit whole number, such as an id GitHub hands out.
func (r *Reader) Int64(name string) int64 {
	v := r.Required(name)
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		r.fail(name, "%q is not a positive whole number", v)
		return 0
	}
	return n
}
