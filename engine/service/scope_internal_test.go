package service

import "testing"

func TestScopedNSSeparatesPrincipals(t *testing.T) {
	principals := []string{"anonymous", "APP", "APP/APP", "APP/bob", "A/PP", "AP/P", "APP/bob/x", "APP/bob", "BOB/APP"}
	seen := map[string]string{}
	for _, p := range principals {
		got := scopedNS(p, "n")
		if prev, ok := seen[got]; ok && prev != p {
			t.Errorf("principals %q and %q share namespace %s", prev, p, got)
		}
		seen[got] = p
		if scopedNS(p, "n") != got {
			t.Errorf("scopedNS(%q) is not deterministic", p)
		}
		if scopedNS(p, "m") == got {
			t.Errorf("scopedNS(%q) ignores the namespace", p)
		}
	}
}
