// Package cdeventstest is a CDEvents receiver for the tests: the
// CloudEvents SDK's own HTTP receiver, holding every event it takes to the
// CDEvents SDK's validation.
package cdeventstest
