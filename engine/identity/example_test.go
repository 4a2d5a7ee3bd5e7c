package identity_test

import (
	"fmt"

	"github.com/edictrt/edict/engine/identity"
	"github.com/edictrt/edict/priority"
)

func ExampleResolver_Resolve() {
	r := identity.Resolver{
		TrustRequestInfo: true, // the engine's account has no application users
		Ceilings:         identity.Ceilings{"APP/ingest": priority.BackgroundIngestion},
	}
	// Headers as the engine receives them: the server wrote
	// Nats-Request-Info when the request crossed the service import.
	c, err := r.Resolve(map[string][]string{
		"Nats-Request-Info":   {`{"acc":"APP","user":"ingest","name":"pretend-to-be-ui"}`},
		"X-Resource-Priority": {"interactive"},
	})
	fmt.Println(c.Principal, c.Class, err)
	// Output: APP/ingest background_ingestion <nil>
}
