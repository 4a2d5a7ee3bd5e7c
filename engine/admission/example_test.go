package admission_test

import (
	"fmt"

	"github.com/edictrt/edict/engine/admission"
)

func ExampleAdmit() {
	global, graphs, read := admission.NewPool(2), admission.NewGraphs(2), admission.NewPool(1)
	w1, _ := admission.Admit(global, graphs, read, "__commons__", true)
	w2, _ := admission.Admit(global, graphs, read, "__commons__", true)
	_, ok := admission.Admit(global, graphs, read, "__commons__", true)
	fmt.Println("third write admitted:", ok)
	r, ok := admission.Admit(global, graphs, read, "__commons__", false)
	fmt.Println("read admitted:", ok, "via", r.Outcome())
	for _, g := range []admission.Grant{r, w2, w1} {
		g.Release()
	}
	fmt.Println("free global permits:", global.Available())
	// Output:
	// third write admitted: false
	// read admitted: true via read_lane
	// free global permits: 2
}
