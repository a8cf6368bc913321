package runner

import (
	"testing"
	"time"
)

// The request settings of a deployment are those of its store and oracle
// clients, defaults included.
func TestDeploymentClientOptions(t *testing.T) {
	d := (&Deployment{Namespace: "ns", RequestTimeout: 3 * time.Second, MinTransferRate: 64 << 10}).EnsureDefaults()
	o := d.clientOptions()
	if o.SubjectPrefix != "ns" || o.RequestTimeout != 3*time.Second || o.MinTransferRate != 64<<10 {
		t.Errorf("client options %+v", o)
	}
	o = new(Deployment).EnsureDefaults().clientOptions()
	if o.RequestTimeout != 10*time.Second || o.MinTransferRate != 1<<20 {
		t.Errorf("default client options %+v", o)
	}
}

// On TiKV a runner keeps more observer transactions in flight by default:
// they wait on round trips rather than use CPU.
func TestWorkersDefaultOnTiKV(t *testing.T) {
	var pebble, onTiKV Config
	onTiKV.Store = "tikv://pd:2379"
	if pebble.EnsureDefaults().Workers != 16 || onTiKV.EnsureDefaults().Workers != 64 {
		t.Errorf("default workers: pebble %d, TiKV %d; want 16 and 64", pebble.Workers, onTiKV.Workers)
	}
}
