package workload

import "testing"

func TestParseCPULine(t *testing.T) {
	got, ok, err := parseCPULine("cpu  100 5 50 800 40 3 2 0 0 0")
	if err != nil || !ok {
		t.Fatalf("ok %v err %v", ok, err)
	}
	if want := (CPUTimes{Busy: 160, Total: 1000}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if _, ok, _ := parseCPULine("cpu0 1 2 3 4 5 6 7 8"); ok {
		t.Fatal("a per-core line is not the aggregate")
	}
	if _, _, err := parseCPULine("cpu  1 2 x 4 5 6 7 8"); err == nil {
		t.Fatal("a bad field parsed")
	}
	later := CPUTimes{Busy: 160 + 150, Total: 1000 + 200}
	if s := got.BusyShare(later); s != 0.75 {
		t.Fatalf("busy share %v, want 0.75", s)
	}
	if s := got.BusyShare(got); s != -1 {
		t.Fatalf("busy share with no tick %v, want -1", s)
	}
}

func TestReadCPUTimes(t *testing.T) {
	a, err := ReadCPUTimes()
	if err != nil {
		t.Fatal(err)
	}
	if a.Total == 0 || a.Busy > a.Total {
		t.Fatalf("implausible reading %+v", a)
	}
}
