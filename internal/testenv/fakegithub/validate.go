package fakegithub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	githubapi "github.com/JorisJonkers-dev/delivery/third_party/github"
)

// maxBody bounds a request body the double reads; the largest the services
// send is a file written through the contents API, base64 in JSON.
const maxBody = 100 << 20

// LoadDocument loads the cut of GitHub's REST API description vendored under
// third_party/github, corrects the one known defect the double meets, and
// checks it is a valid OpenAPI document. The defect: a few error answers are
// described as oneOf alternatives none of which requires a property (409 to a
// contents write: basic-error or repository-rule-violation-error), so every
// error body matches them all and oneOf, which wants exactly one, refuses
// GitHub's own answer. Those become anyOf; nothing else is changed. It
// returns the answers corrected, so a test can see the correction stays
// needed. Examples are not checked: the double is held to the schemas.
func LoadDocument(ctx context.Context) (*openapi3.T, []string, error) {
	doc, err := openapi3.NewLoader().LoadFromData(githubapi.Document)
	if err != nil {
		return nil, nil, fmt.Errorf("load GitHub's REST API description: %w", err)
	}
	var corrected []string
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for code, resp := range op.Responses.Map() {
				if resp.Value == nil {
					continue
				}
				for _, media := range resp.Value.Content {
					if media.Schema == nil || media.Schema.Value == nil || !indistinct(media.Schema.Value.OneOf) {
						continue
					}
					schema := media.Schema.Value
					schema.AnyOf, schema.OneOf = schema.OneOf, nil
					corrected = append(corrected, method+" "+path+" "+code)
				}
			}
		}
	}
	if err := doc.Validate(ctx, openapi3.DisableExamplesValidation()); err != nil {
		return nil, nil, fmt.Errorf("GitHub's REST API description is not a valid OpenAPI document: %w", err)
	}
	return doc, corrected, nil
}

// indistinct says whether oneOf's alternatives are objects none of which
// requires a property, so no body can match exactly one of them.
func indistinct(oneOf openapi3.SchemaRefs) bool {
	if len(oneOf) < 2 {
		return false
	}
	for _, alt := range oneOf {
		if alt.Value == nil || !alt.Value.Type.Is(openapi3.TypeObject) || len(alt.Value.Required) > 0 {
			return false
		}
	}
	return true
}

// description is the loaded document with its operations by id, loaded once:
// validation only reads it, so every double shares it.
type description struct {
	doc        *openapi3.T
	operations map[string]*routers.Route
	basicError *openapi3.Schema
}

var loadDescription = sync.OnceValues(func() (*description, error) {
	doc, _, err := LoadDocument(context.Background())
	if err != nil {
		return nil, err
	}
	d := &description{doc: doc, operations: map[string]*routers.Route{}}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			d.operations[op.OperationID] = &routers.Route{Spec: doc, Path: path, PathItem: item, Method: method, Operation: op}
		}
	}
	if ref := doc.Components.Schemas["basic-error"]; ref != nil {
		d.basicError = ref.Value
	}
	if d.basicError == nil {
		return nil, errors.New("GitHub's REST API description has no basic-error schema")
	}
	return d, nil
})

// Operation names the operation of GitHub's description a pattern of the
// double's serves, and checks they agree on method and path, so a route the
// double serves that GitHub does not describe keeps it from starting.
func (d *description) operation(pattern, id string) (*routers.Route, error) {
	route, ok := d.operations[id]
	if !ok {
		return nil, fmt.Errorf("%s: operation %s is not in GitHub's REST API description as vendored (third_party/github/operations.txt)", pattern, id)
	}
	method, path, _ := strings.Cut(pattern, " ")
	if method != route.Method || strings.ReplaceAll(path, "...}", "}") != route.Path {
		return nil, fmt.Errorf("%s: GitHub describes %s as %s %s", pattern, id, route.Method, route.Path)
	}
	return route, nil
}

// ServedOperations lists the operation ids of GitHub's description the double
// serves, one per route, in the order it routes them.
func ServedOperations() []string {
	var ids []string
	for _, rt := range routes() {
		ids = append(ids, rt.operation)
	}
	return ids
}

// refusal is the answer GitHub gives a request its description refuses.
type refusal struct {
	status  int
	message string
}

// checkRequest holds a request to its operation in GitHub's description. A
// request it refuses is reported as a violation, the product's fault, and
// answered as GitHub would: 404 for a path parameter GitHub would not route
// (an id that is not a number), 400 for a body that is not JSON, 422 for
// anything else. A query parameter the operation does not declare is reported
// but not refused, as GitHub ignores it.
func (s *Server) checkRequest(r *http.Request, route *routers.Route, body []byte) *refusal {
	params := map[string]string{}
	for _, p := range append(route.PathItem.Parameters, route.Operation.Parameters...) {
		if p.Value != nil && p.Value.In == openapi3.ParameterInPath {
			params[p.Value.Name] = r.PathValue(p.Value.Name)
		}
	}
	for name := range r.URL.Query() {
		if route.Operation.Parameters.GetByInAndName(openapi3.ParameterInQuery, name) == nil &&
			route.PathItem.Parameters.GetByInAndName(openapi3.ParameterInQuery, name) == nil {
			s.violate(fmt.Errorf("request %s %s: query parameter %q is not declared by %s; GitHub ignores it",
				r.Method, r.URL.Path, name, route.Operation.OperationID))
		}
	}
	checked := r
	if rb := route.Operation.RequestBody; rb != nil && rb.Value != nil && !rb.Value.Required && string(bytes.TrimSpace(body)) == "null" {
		// GitHub reads a JSON null as no body where the body is optional;
		// ghinstallation sends one with every token request it makes
		// without options. The description's schema does not allow null.
		checked = r.Clone(r.Context())
		checked.Body, checked.ContentLength = http.NoBody, 0
		checked.Header.Del("Content-Type")
	}
	err := openapi3filter.ValidateRequest(r.Context(), &openapi3filter.RequestValidationInput{
		Request: checked, PathParams: params, Route: route,
		Options: &openapi3filter.Options{
			MultiError: true,
			// Validation would otherwise write the description's defaults
			// (sha=none on a deployments list) into the request served.
			SkipSettingDefaults: true,
			// Credentials are checked by authenticate, with GitHub's answers.
			AuthenticationFunc: func(context.Context, *openapi3filter.AuthenticationInput) error { return nil },
		},
	})
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err == nil {
		return nil
	}
	s.violate(fmt.Errorf("request %s %s refused by GitHub's description of %s: %w",
		r.Method, r.URL.Path, route.Operation.OperationID, err))
	var errs openapi3.MultiError
	if !errors.As(err, &errs) {
		errs = openapi3.MultiError{err}
	}
	for _, e := range errs {
		var re *openapi3filter.RequestError
		if errors.As(e, &re) && re.Parameter != nil && re.Parameter.In == openapi3.ParameterInPath {
			return &refusal{http.StatusNotFound, "Not Found"}
		}
	}
	if len(bytes.TrimSpace(body)) > 0 && !json.Valid(body) {
		return &refusal{http.StatusBadRequest, "Problems parsing JSON"}
	}
	return &refusal{http.StatusUnprocessableEntity, "Invalid request.\n\n" + err.Error()}
}

// checkAnswer holds an answer the double gives to its operation's responses
// in GitHub's description; one it refuses is a bug in the double. Three
// answers GitHub gives are described in its prose rather than per operation,
// and are held to that: 304 Not Modified to a conditional GET, without a
// body; an error any operation may answer (401, 403, 5xx) with GitHub's
// basic-error body; and the raw media type (application/vnd.github.raw),
// whose bytes are the file's.
func (s *Server) checkAnswer(r *http.Request, route *routers.Route, status int, header http.Header, body []byte) {
	if err := s.answerError(r, route, status, header, body); err != nil {
		s.violate(fmt.Errorf("answer %d to %s %s does not follow GitHub's description of %s: %w",
			status, r.Method, r.URL.Path, route.Operation.OperationID, err))
	}
}

func (s *Server) answerError(r *http.Request, route *routers.Route, status int, header http.Header, body []byte) error {
	if status == http.StatusNotModified {
		if r.Method != http.MethodGet || len(body) > 0 {
			return errors.New("304 answers a conditional GET, without a body")
		}
		return nil
	}
	if route.Operation.Responses.Status(status) == nil {
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			return fmt.Errorf("an undescribed status must carry GitHub's error body: %w", err)
		}
		if m, _ := v.(map[string]any); m == nil || m["message"] == nil {
			return errors.New("an undescribed status must carry GitHub's error body, with a message")
		}
		return s.spec.basicError.VisitJSON(v)
	}
	if mt, _, _ := mime.ParseMediaType(header.Get("Content-Type")); mt == "application/vnd.github.raw" {
		if !strings.Contains(r.Header.Get("Accept"), ".raw") {
			return errors.New("the raw media type answers only a request that asks for it")
		}
		return nil
	}
	return openapi3filter.ValidateResponse(r.Context(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: r, Route: route},
		Status:                 status,
		Header:                 header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	})
}

// Violations lists every disagreement with GitHub's description seen so far:
// requests the product made that GitHub would refuse, and answers of the
// double's that GitHub would not give. A double from New also fails its test
// on each; one from Start keeps them here for its owner to check.
func (s *Server) Violations() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.violations...)
}

// OnViolation hands every disagreement with GitHub's description to report
// as well as keeping it, in place of failing the test; the double's own tests
// of refusals use it.
func OnViolation(report func(error)) Option { return func(s *Server) { s.onViolation = report } }

func (s *Server) violate(err error) {
	s.mu.Lock()
	s.violations = append(s.violations, err)
	report := s.onViolation
	s.mu.Unlock()
	if report != nil {
		report(err)
	}
}

// recorder holds an answer until it has been checked against GitHub's
// description, then sends it.
type recorder struct {
	http.ResponseWriter
	status int
	wrote  bool
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(p)
}

func (r *recorder) send() {
	r.ResponseWriter.WriteHeader(r.status)
	_, _ = r.ResponseWriter.Write(r.body.Bytes())
}
