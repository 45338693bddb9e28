//go:build purego

package bench

// puregoBuild is true when gmgate was built with the purego tag, which makes
// gmsm (and Go's crypto) use their portable Go code everywhere.
const puregoBuild = true
