// Package doccheck holds repository-wide checks that run with the tests: every
// package in the module has exactly one package comment (on one non-test
// file), so go doc shows one coherent overview per package.
package doccheck
