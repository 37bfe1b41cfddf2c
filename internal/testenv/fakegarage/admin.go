package fakegarage

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// answer is a response the double gives: a status and a JSON body.
type answer struct {
	status int
	body   any
}

// garageError is Garage's error body. Garage's document describes only its
// 200 and 500 answers; its 400, 403, 404 and 409 answers carry this body.
type garageError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Region  string `json:"region"`
	Path    string `json:"path"`
}

func fail(status int, code, format string, args ...any) answer {
	return answer{status: status, body: garageError{Code: code, Message: fmt.Sprintf(format, args...), Region: "garage"}}
}

const maxBody = 1 << 20

func (g *Garage) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		g.write(w, r, nil, fail(http.StatusBadRequest, "InvalidRequest", "read the body: %v", err))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))

	route, params, err := g.router.FindRoute(r)
	if err != nil {
		g.drift(fmt.Errorf("%s %s: no such operation in the document: %w", r.Method, r.URL.Path, err))
		g.write(w, r, nil, fail(http.StatusNotFound, "InvalidRequest", "no such endpoint: %s %s", r.Method, r.URL.Path))
		return
	}
	op := route.Operation.OperationID
	g.mu.Lock()
	g.requests[op]++
	if r.Method == http.MethodPost {
		g.writes++
	}
	g.mu.Unlock()

	in := &openapi3filter.RequestValidationInput{
		Request:    r,
		PathParams: params,
		Route:      route,
		Options: &openapi3filter.Options{
			MultiError: true,
			// The token is checked below, as Garage does once the request
			// has parsed, with the answers Garage gives.
			AuthenticationFunc: func(context.Context, *openapi3filter.AuthenticationInput) error { return nil },
		},
	}
	if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
		g.drift(fmt.Errorf("request %s: %w", op, err))
		g.write(w, r, route, fail(http.StatusBadRequest, "InvalidRequest", "request does not follow the API: %v", err))
		return
	}
	if err := undeclaredQuery(route.Operation, r); err != nil {
		g.drift(fmt.Errorf("request %s: %w", op, err))
		g.write(w, r, route, fail(http.StatusBadRequest, "InvalidRequest", "%v", err))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if refusal := checkToken(r.Header.Values("Authorization"), g.Token); refusal != "" {
		g.write(w, r, route, fail(http.StatusForbidden, "AccessDenied", "Forbidden: %s", refusal))
		return
	}
	g.write(w, r, route, g.handle(op, r, body))
}

// checkToken is Garage's check of the admin token (v2.0.0,
// verify_authorization): why it refuses the request, or "".
func checkToken(header []string, token string) string {
	if len(header) == 0 {
		return "Bearer token must be provided in Authorization header"
	}
	given, ok := strings.CutPrefix(header[0], "Bearer ")
	if !ok {
		return "Invalid Authorization header"
	}
	if strings.TrimSpace(given) != token {
		return "Invalid bearer token"
	}
	return ""
}

// write validates the answer against the document and sends it. An answer
// with a status the document does not describe must be Garage's error body.
func (g *Garage) write(w http.ResponseWriter, r *http.Request, route *routers.Route, a answer) {
	if e, ok := a.body.(garageError); ok {
		e.Path = r.URL.Path
		a.body = e
	}
	raw, err := json.Marshal(a.body)
	if err != nil {
		g.drift(fmt.Errorf("encode the answer: %w", err))
		http.Error(w, "encode the answer", http.StatusInternalServerError)
		return
	}
	header := http.Header{"Content-Type": {"application/json"}}
	if route != nil {
		if err := g.validateResponse(r, route, a.status, header, raw); err != nil {
			g.drift(fmt.Errorf("response to %s: %w", route.Operation.OperationID, err))
		}
	}
	for k, v := range header {
		w.Header()[k] = v
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(raw)
}

func (g *Garage) handle(op string, r *http.Request, body []byte) answer {
	g.mu.Lock()
	defer g.mu.Unlock()
	q, refused := garageQuery(r.URL.RawQuery)
	if refused != nil {
		return *refused
	}
	switch op {
	case "ListKeys":
		return g.listKeys()
	case "GetKeyInfo":
		showSecret, refused := flag(q, "showSecretKey", false)
		if refused != nil {
			return *refused
		}
		return g.getKeyInfo(param(q, "id"), param(q, "search"), showSecret)
	case "CreateKey":
		var req struct {
			Name         *string         `json:"name"`
			Allow        json.RawMessage `json:"allow"`
			Deny         json.RawMessage `json:"deny"`
			Expiration   *string         `json:"expiration"`
			NeverExpires bool            `json:"neverExpires"`
		}
		if err := decodeStrict(body, &req); err != nil {
			g.drift(fmt.Errorf("request CreateKey: %w", err))
			return fail(http.StatusBadRequest, "InvalidRequest", "%v", err)
		}
		name := "Unnamed key"
		if req.Name != nil {
			name = *req.Name
		}
		return answer{http.StatusOK, g.keyInfo(g.newKey(name), true)}
	case "ImportKey":
		var req struct {
			AccessKeyID     string  `json:"accessKeyId"`
			SecretAccessKey string  `json:"secretAccessKey"`
			Name            *string `json:"name"`
		}
		if err := decodeStrict(body, &req); err != nil {
			g.drift(fmt.Errorf("request ImportKey: %w", err))
			return fail(http.StatusBadRequest, "InvalidRequest", "%v", err)
		}
		return g.importKey(req.AccessKeyID, req.SecretAccessKey, req.Name)
	case "ListBuckets":
		return g.listBuckets()
	case "GetBucketInfo":
		return g.getBucketInfo(param(q, "id"), param(q, "globalAlias"), param(q, "search"))
	case "CreateBucket":
		var req struct {
			GlobalAlias *string         `json:"globalAlias"`
			LocalAlias  json.RawMessage `json:"localAlias"`
		}
		if err := decodeStrict(body, &req); err != nil {
			g.drift(fmt.Errorf("request CreateBucket: %w", err))
			return fail(http.StatusBadRequest, "InvalidRequest", "%v", err)
		}
		if len(req.LocalAlias) > 0 && string(req.LocalAlias) != "null" {
			g.drift(fmt.Errorf("CreateBucket with a local alias: the double does not model local aliases"))
			return fail(http.StatusBadRequest, "InvalidRequest", "local aliases are not modelled")
		}
		return g.createBucket(req.GlobalAlias)
	case "AllowBucketKey":
		var req struct {
			BucketID    string `json:"bucketId"`
			AccessKeyID string `json:"accessKeyId"`
			Permissions struct {
				Read  bool `json:"read"`
				Write bool `json:"write"`
				Owner bool `json:"owner"`
			} `json:"permissions"`
		}
		if err := decodeStrict(body, &req); err != nil {
			g.drift(fmt.Errorf("request AllowBucketKey: %w", err))
			return fail(http.StatusBadRequest, "InvalidRequest", "%v", err)
		}
		return g.allowBucketKey(req.BucketID, req.AccessKeyID, Perm{Read: req.Permissions.Read, Write: req.Permissions.Write, Owner: req.Permissions.Owner})
	default:
		g.drift(fmt.Errorf("operation %s is in the document but not modelled by the double", op))
		return fail(http.StatusInternalServerError, "InternalError", "%s is not modelled", op)
	}
}

// garageQuery is a request's query as Garage's router reads it: a parameter
// given with an empty value counts as not given, and one given twice with a
// value is refused.
func garageQuery(raw string) (map[string]string, *answer) {
	values, err := url.ParseQuery(raw)
	if err != nil {
		a := fail(http.StatusBadRequest, "InvalidRequest", "Bad request: %v", err)
		return nil, &a
	}
	out := map[string]string{}
	for name, vs := range values {
		for _, v := range vs {
			if v == "" {
				continue
			}
			if _, twice := out[name]; twice {
				a := fail(http.StatusBadRequest, "InvalidRequest", "Bad request: Query parameter repeated: '%s'", name)
				return nil, &a
			}
			out[name] = v
		}
	}
	return out, nil
}

// param is a query parameter, nil when not given.
func param(q map[string]string, name string) *string {
	v, ok := q[name]
	if !ok {
		return nil
	}
	return &v
}

// flag is a boolean query parameter as Garage parses it: true or false, and
// def when not given.
func flag(q map[string]string, name string, def bool) (bool, *answer) {
	switch v, ok := q[name]; {
	case !ok:
		return def, nil
	case v == "true" || v == "false":
		return v == "true", nil
	default:
		a := fail(http.StatusBadRequest, "InvalidRequest", "Bad request: Failed to parse query parameter")
		return false, &a
	}
}
