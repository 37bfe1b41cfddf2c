// Command githubopenapi cuts GitHub's published REST API description down to
// the operations the services call and the GitHub double serves, with every
// component those reach, so third_party/github/ holds only what the double is
// validated against and the next version is cut the same way.
package main
