// Command rollout-conformance runs one sync pass of the real Kubernetes Deployment controller
// (k8s.io/kubernetes/pkg/controller/deployment at the version go.mod pins) per input, set up the
// way the controller's own unit tests set it up: a fake clientset and informer stores holding one
// Deployment and its ReplicaSets, then syncDeployment. It exists so that krane's rollout engine
// (src/rollout) can be compared with the real thing on many generated inputs
// (test/support/rollout-conformance). A test tool only: nothing here ships with krane.
//
// Protocol: one request per line on stdin, {"id": N, "input": <krane rollout input>} where the
// input is what `krane rollout plan` accepts, already validated with its defaults filled in; one
// answer per line on stdout, {"id": N, "output": {...}} in the shape of the engine's output, or
// {"id": N, "error": "..."} when the input cannot be expressed as Kubernetes objects. One
// process serves any number of requests, one after the other.
//
// Mapping: the Deployment is named after deployment.name; every revision with a revision number
// is a ReplicaSet of that name, owned by the Deployment, whose pod template differs from the
// others only in the container image (the revision's name); the Deployment's template is the
// target's. A target without a revision number has no ReplicaSet: the controller creates one
// (named <deployment>-<hash>), which is reported under the target's name. A revision's pod counts
// become its ReplicaSet's status; only its terminating pods also exist as pods (with a deletion
// timestamp), since Recreate looks at the pods themselves.
//
// Three private parts of the controller are reached without copying any of its code:
// syncDeployment through a pull-only //go:linkname; the package clocks (nowFn) of the controller
// and of its util package, also by linkname; and the controller's event recorder and work queue,
// swapped through reflection so that events and requeues are recorded.
//
// Time: conditions the controller writes are stamped with the wall clock (metav1.Now), which
// cannot be redirected. So the pass runs at the wall-clock instant F it starts: the package clocks
// return F, every input time is shifted by F − now, and on the way out a time stamped during the
// pass is reported as the input's now and any other time is shifted back. A requeue computed from
// a condition stamped during the pass is corrected by the few microseconds between F and it.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unsafe"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/deployment"
)

//go:linkname syncDeployment k8s.io/kubernetes/pkg/controller/deployment.(*DeploymentController).syncDeployment
func syncDeployment(dc *deployment.DeploymentController, ctx context.Context, key string) error

//go:linkname controllerNow k8s.io/kubernetes/pkg/controller/deployment.nowFn
var controllerNow func() time.Time

//go:linkname utilNow k8s.io/kubernetes/pkg/controller/deployment/util.nowFn
var utilNow func() time.Time

const (
	namespace    = "default"
	appLabel     = "krane-conformance"
	hashLabel    = apps.DefaultDeploymentUniqueLabelKey
	revisionAnn  = "deployment.kubernetes.io/revision"
	desiredAnn   = "deployment.kubernetes.io/desired-replicas"
	maxAnn       = "deployment.kubernetes.io/max-replicas"
	rollbackAnn  = apps.DeprecatedRollbackTo
	deploymentID = types.UID("deployment-uid")
)

// ---- the engine's input (src/rollout/types.ts) ----

type condition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	Reason             string `json:"reason"`
	Message            string `json:"message"`
	LastUpdateTime     string `json:"lastUpdateTime"`
	LastTransitionTime string `json:"lastTransitionTime"`
}

type deploymentStatus struct {
	Replicas            int32 `json:"replicas"`
	UpdatedReplicas     int32 `json:"updatedReplicas"`
	ReadyReplicas       int32 `json:"readyReplicas"`
	AvailableReplicas   int32 `json:"availableReplicas"`
	UnavailableReplicas int32 `json:"unavailableReplicas"`
}

type strategy struct {
	Type          string `json:"type"`
	RollingUpdate *struct {
		MaxSurge       json.RawMessage `json:"maxSurge"`
		MaxUnavailable json.RawMessage `json:"maxUnavailable"`
	} `json:"rollingUpdate"`
}

type deploymentInput struct {
	Name                    string           `json:"name"`
	Replicas                int32            `json:"replicas"`
	Strategy                strategy         `json:"strategy"`
	MinReadySeconds         int32            `json:"minReadySeconds"`
	ProgressDeadlineSeconds *int32           `json:"progressDeadlineSeconds"`
	RevisionHistoryLimit    *int32           `json:"revisionHistoryLimit"`
	Paused                  bool             `json:"paused"`
	Target                  string           `json:"target"`
	RollbackTo              *int64           `json:"rollbackTo"`
	Status                  deploymentStatus `json:"status"`
	Conditions              []condition      `json:"conditions"`
}

type revisionInput struct {
	Name            string `json:"name"`
	Revision        *int64 `json:"revision"`
	CreatedAt       string `json:"createdAt"`
	Replicas        int32  `json:"replicas"`
	DesiredReplicas *int32 `json:"desiredReplicas"`
	MaxReplicas     *int32 `json:"maxReplicas"`
	Status          struct {
		Replicas          int32 `json:"replicas"`
		ReadyReplicas     int32 `json:"readyReplicas"`
		AvailableReplicas int32 `json:"availableReplicas"`
		// Pods being deleted: modelled as pods with a deletion timestamp (Recreate waits for them).
		TerminatingReplicas int32 `json:"terminatingReplicas"`
	} `json:"status"`
}

type rolloutInput struct {
	Now        string          `json:"now"`
	Deployment deploymentInput `json:"deployment"`
	Revisions  []revisionInput `json:"revisions"`
}

// ---- what the controller did, in the engine's output shape ----

type revisionOutput struct {
	Name            string `json:"name"`
	Revision        *int64 `json:"revision"`
	Replicas        int32  `json:"replicas"`
	DesiredReplicas *int64 `json:"desiredReplicas,omitempty"`
	MaxReplicas     *int64 `json:"maxReplicas,omitempty"`
}

type event struct {
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

type rolloutOutput struct {
	Target              string           `json:"target"`
	Revisions           []revisionOutput `json:"revisions"`
	Delete              []string         `json:"delete"`
	Status              deploymentStatus `json:"status"`
	Conditions          []condition      `json:"conditions"`
	Events              []event          `json:"events"`
	RequeueAfterSeconds *float64         `json:"requeueAfterSeconds"`
	// The error syncDeployment returned (Kubernetes then requeues with backoff), if any.
	SyncError string `json:"syncError,omitempty"`
}

type request struct {
	ID    int64           `json:"id"`
	Input json.RawMessage `json:"input"`
}

type response struct {
	ID     int64          `json:"id"`
	Output *rolloutOutput `json:"output,omitempty"`
	Error  string         `json:"error,omitempty"`
}

// ---- recorders swapped into the controller ----

type recorder struct{ events []event }

func (r *recorder) Event(_ runtime.Object, eventtype, reason, message string) {
	r.events = append(r.events, event{eventtype, reason, message})
}

func (r *recorder) Eventf(_ runtime.Object, eventtype, reason, messageFmt string, args ...interface{}) {
	r.events = append(r.events, event{eventtype, reason, fmt.Sprintf(messageFmt, args...)})
}

func (r *recorder) AnnotatedEventf(o runtime.Object, _ map[string]string, eventtype, reason, messageFmt string, args ...interface{}) {
	r.Eventf(o, eventtype, reason, messageFmt, args...)
}

// queue records what a sync asks of the work queue; the other methods are never called during
// a sync and panic through the nil embedded interface if they are.
type queue struct {
	workqueue.TypedRateLimitingInterface[string]
	after       []time.Duration
	rateLimited int
	added       int
}

func (q *queue) Add(string)                         { q.added++ }
func (q *queue) AddAfter(_ string, d time.Duration) { q.after = append(q.after, d) }
func (q *queue) AddRateLimited(string)              { q.rateLimited++ }

// field returns a settable view of the controller's private field `name`, checking its type.
func field[T any](dc *deployment.DeploymentController, name string) *T {
	f := reflect.ValueOf(dc).Elem().FieldByName(name)
	want := reflect.TypeOf((*T)(nil)).Elem()
	if !f.IsValid() || f.Type() != want {
		panic(fmt.Sprintf("DeploymentController.%s is not a %s in this Kubernetes version", name, want))
	}
	return (*T)(unsafe.Pointer(f.UnsafeAddr()))
}

// ---- input → Kubernetes objects ----

func parseTime(s, fieldName string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %v", fieldName, err)
	}
	return t, nil
}

// formatTime writes a time the way the engine does: UTC, milliseconds only when not zero.
func formatTime(t time.Time) string {
	return strings.Replace(t.UTC().Format("2006-01-02T15:04:05.000Z"), ".000Z", "Z", 1)
}

func intOrPercent(raw json.RawMessage, fieldName string) (*intstr.IntOrString, error) {
	if len(raw) == 0 || string(raw) == "null" {
		v := intstr.FromInt32(0)
		return &v, nil
	}
	var n int32
	if err := json.Unmarshal(raw, &n); err == nil {
		v := intstr.FromInt32(n)
		return &v, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("%s: neither an int32 nor a string", fieldName)
	}
	v := intstr.FromString(s)
	return &v, nil
}

func template(image string, hash string) v1.PodTemplateSpec {
	labels := map[string]string{"app": appLabel}
	if hash != "" {
		labels[hashLabel] = hash
	}
	return v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: image}}},
	}
}

// maxTerminatingPods bounds the pods one revision may ask for (each is an object in memory).
const maxTerminatingPods = 1000

func objects(in *rolloutInput, shift time.Duration) (*apps.Deployment, []*apps.ReplicaSet, []*v1.Pod, error) {
	d := in.Deployment
	dep := &apps.Deployment{
		TypeMeta: metav1.TypeMeta{Kind: "Deployment", APIVersion: "apps/v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: d.Name, Namespace: namespace, UID: deploymentID, Generation: 1,
			Annotations: map[string]string{},
		},
		Spec: apps.DeploymentSpec{
			Replicas:                &d.Replicas,
			Selector:                &metav1.LabelSelector{MatchLabels: map[string]string{"app": appLabel}},
			Template:                template(d.Target, ""),
			MinReadySeconds:         d.MinReadySeconds,
			RevisionHistoryLimit:    d.RevisionHistoryLimit,
			Paused:                  d.Paused,
			ProgressDeadlineSeconds: d.ProgressDeadlineSeconds,
		},
	}
	switch d.Strategy.Type {
	case "Recreate":
		dep.Spec.Strategy = apps.DeploymentStrategy{Type: apps.RecreateDeploymentStrategyType}
	case "RollingUpdate":
		if d.Strategy.RollingUpdate == nil {
			return nil, nil, nil, errors.New("deployment.strategy.rollingUpdate: missing")
		}
		surge, err := intOrPercent(d.Strategy.RollingUpdate.MaxSurge, "maxSurge")
		if err != nil {
			return nil, nil, nil, err
		}
		unavailable, err := intOrPercent(d.Strategy.RollingUpdate.MaxUnavailable, "maxUnavailable")
		if err != nil {
			return nil, nil, nil, err
		}
		dep.Spec.Strategy = apps.DeploymentStrategy{
			Type:          apps.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &apps.RollingUpdateDeployment{MaxSurge: surge, MaxUnavailable: unavailable},
		}
	default:
		return nil, nil, nil, fmt.Errorf("deployment.strategy.type: unknown %q", d.Strategy.Type)
	}
	if d.RollbackTo != nil {
		dep.Annotations[rollbackAnn] = strconv.FormatInt(*d.RollbackTo, 10)
	}
	// As the previous pass would have stored it: the sum over the ReplicaSets (added below).
	terminating := int32(0)
	dep.Status = apps.DeploymentStatus{
		ObservedGeneration:  1,
		Replicas:            d.Status.Replicas,
		UpdatedReplicas:     d.Status.UpdatedReplicas,
		ReadyReplicas:       d.Status.ReadyReplicas,
		AvailableReplicas:   d.Status.AvailableReplicas,
		UnavailableReplicas: d.Status.UnavailableReplicas,
		TerminatingReplicas: &terminating,
	}
	for i, c := range d.Conditions {
		upd, err := parseTime(c.LastUpdateTime, fmt.Sprintf("deployment.conditions[%d].lastUpdateTime", i))
		if err != nil {
			return nil, nil, nil, err
		}
		tr, err := parseTime(c.LastTransitionTime, fmt.Sprintf("deployment.conditions[%d].lastTransitionTime", i))
		if err != nil {
			return nil, nil, nil, err
		}
		dep.Status.Conditions = append(dep.Status.Conditions, apps.DeploymentCondition{
			Type: apps.DeploymentConditionType(c.Type), Status: v1.ConditionStatus(c.Status),
			Reason: c.Reason, Message: c.Message,
			LastUpdateTime: metav1.NewTime(upd.Add(shift)), LastTransitionTime: metav1.NewTime(tr.Add(shift)),
		})
	}

	var rss []*apps.ReplicaSet
	var pods []*v1.Pod
	for i := range in.Revisions {
		r := &in.Revisions[i]
		if r.Revision == nil {
			continue
		}
		if r.Name == d.Target {
			dep.Annotations[revisionAnn] = strconv.FormatInt(*r.Revision, 10)
		}
		created, err := parseTime(r.CreatedAt, fmt.Sprintf("revisions[%d].createdAt", i))
		if err != nil {
			return nil, nil, nil, err
		}
		hash := fmt.Sprintf("h%d", i)
		ann := map[string]string{revisionAnn: strconv.FormatInt(*r.Revision, 10)}
		if r.DesiredReplicas != nil {
			ann[desiredAnn] = strconv.FormatInt(int64(*r.DesiredReplicas), 10)
		}
		if r.MaxReplicas != nil {
			ann[maxAnn] = strconv.FormatInt(int64(*r.MaxReplicas), 10)
		}
		replicas := r.Replicas
		terminatingPods := r.Status.TerminatingReplicas
		if terminatingPods > maxTerminatingPods {
			return nil, nil, nil, fmt.Errorf("revisions[%d].status.terminatingReplicas: at most %d modelled", i, maxTerminatingPods)
		}
		rs := &apps.ReplicaSet{
			TypeMeta: metav1.TypeMeta{Kind: "ReplicaSet", APIVersion: "apps/v1"},
			ObjectMeta: metav1.ObjectMeta{
				Name: r.Name, Namespace: namespace, UID: types.UID("rs-" + r.Name), Generation: 1,
				CreationTimestamp: metav1.NewTime(created.Add(shift)),
				Labels:            map[string]string{"app": appLabel, hashLabel: hash},
				Annotations:       ann,
				OwnerReferences:   []metav1.OwnerReference{*metav1.NewControllerRef(dep, apps.SchemeGroupVersion.WithKind("Deployment"))},
			},
			Spec: apps.ReplicaSetSpec{
				Replicas: &replicas,
				// The agent applies the environment's minReadySeconds to every revision.
				MinReadySeconds: d.MinReadySeconds,
				Selector:        &metav1.LabelSelector{MatchLabels: map[string]string{"app": appLabel, hashLabel: hash}},
				Template:        template(r.Name, hash),
			},
			Status: apps.ReplicaSetStatus{
				Replicas:            r.Status.Replicas,
				ReadyReplicas:       r.Status.ReadyReplicas,
				AvailableReplicas:   r.Status.AvailableReplicas,
				TerminatingReplicas: &terminatingPods,
				ObservedGeneration:  1,
			},
		}
		rss = append(rss, rs)
		for k := int32(0); k < terminatingPods; k++ {
			deleting := metav1.NewTime(created.Add(shift))
			pods = append(pods, &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{
					Name: fmt.Sprintf("%s-terminating-%d", r.Name, k), Namespace: namespace,
					UID:               types.UID(fmt.Sprintf("pod-%s-%d", r.Name, k)),
					Labels:            rs.Spec.Template.Labels,
					OwnerReferences:   []metav1.OwnerReference{*metav1.NewControllerRef(rs, apps.SchemeGroupVersion.WithKind("ReplicaSet"))},
					DeletionTimestamp: &deleting,
				},
				Spec:   rs.Spec.Template.Spec,
				Status: v1.PodStatus{Phase: v1.PodRunning},
			})
		}
	}
	for _, rs := range rss {
		*dep.Status.TerminatingReplicas += *rs.Status.TerminatingReplicas
	}
	return dep, rss, pods, nil
}

// ---- one pass ----

func runPass(in *rolloutInput) (out *rolloutOutput, err error) {
	now, err := parseTime(in.Now, "now")
	if err != nil {
		return nil, err
	}
	// The pass runs at the wall-clock instant it starts (see the file comment).
	start := time.Now()
	shift := start.Sub(now)
	dep, rss, pods, err := objects(in, shift)
	if err != nil {
		return nil, err
	}
	objs := []runtime.Object{dep}
	for _, rs := range rss {
		objs = append(objs, rs)
	}
	client := fake.NewSimpleClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dc, err := deployment.NewDeploymentController(ctx,
		factory.Apps().V1().Deployments(), factory.Apps().V1().ReplicaSets(), factory.Core().V1().Pods(), client)
	if err != nil {
		return nil, err
	}
	// Stop what the constructor started before swapping in the recorders.
	(*field[workqueue.TypedRateLimitingInterface[string]](dc, "queue")).ShutDown()
	(*field[record.EventBroadcaster](dc, "eventBroadcaster")).Shutdown()
	events := &recorder{}
	q := &queue{}
	*field[record.EventRecorder](dc, "eventRecorder") = events
	*field[workqueue.TypedRateLimitingInterface[string]](dc, "queue") = q

	if err := factory.Apps().V1().Deployments().Informer().GetIndexer().Add(dep); err != nil {
		return nil, err
	}
	for _, rs := range rss {
		if err := factory.Apps().V1().ReplicaSets().Informer().GetIndexer().Add(rs); err != nil {
			return nil, err
		}
	}
	for _, pod := range pods {
		if err := factory.Core().V1().Pods().Informer().GetIndexer().Add(pod); err != nil {
			return nil, err
		}
	}

	controllerNow = func() time.Time { return start }
	utilNow = func() time.Time { return start }
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("the controller panicked: %v", p)
		}
	}()
	syncErr := syncDeployment(dc, ctx, namespace+"/"+dep.Name)
	finished := time.Now()
	return collect(in, client, dep, rss, events, q, syncErr, now, shift, start, finished)
}

// collect reads what the sync did: final objects from the fake clientset, deletions from its
// recorded actions, events and requeues from the recorders.
func collect(in *rolloutInput, client *fake.Clientset, dep *apps.Deployment, rss []*apps.ReplicaSet,
	events *recorder, q *queue, syncErr error, now time.Time, shift time.Duration, started, finished time.Time) (*rolloutOutput, error) {
	ctx := context.Background()
	// Newest object of each ReplicaSet name that the sync wrote (a deleted one keeps its last state).
	last := map[string]*apps.ReplicaSet{}
	for _, rs := range rss {
		last[rs.Name] = rs
	}
	deleted := []string{}
	created := ""
	for _, a := range client.Actions() {
		if a.GetResource().Resource != "replicasets" {
			continue
		}
		// By verb: create and update actions have the same method set.
		switch a.GetVerb() {
		case "create":
			if rs, ok := a.(core.CreateAction).GetObject().(*apps.ReplicaSet); ok {
				created = rs.Name
				last[rs.Name] = rs
			}
		case "update":
			if rs, ok := a.(core.UpdateAction).GetObject().(*apps.ReplicaSet); ok {
				last[rs.Name] = rs
			}
		case "delete":
			deleted = append(deleted, a.(core.DeleteAction).GetName())
		}
	}
	final, err := client.AppsV1().Deployments(namespace).Get(ctx, dep.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	target := final.Spec.Template.Spec.Containers[0].Image
	// The created ReplicaSet is reported under the target's name, in names and in messages.
	rename := func(s string) string {
		if created == "" {
			return s
		}
		return strings.ReplaceAll(s, created, in.Deployment.Target)
	}

	out := &rolloutOutput{Target: target, Delete: []string{}, Events: []event{}, Conditions: []condition{}}
	for _, name := range deleted {
		out.Delete = append(out.Delete, rename(name))
	}
	for _, r := range in.Revisions {
		o := revisionOutput{Name: r.Name}
		rs := last[r.Name]
		if rs == nil && r.Name == in.Deployment.Target && created != "" {
			rs = last[created]
		}
		if rs != nil {
			o.Replicas = *rs.Spec.Replicas
			if v, err := strconv.ParseInt(rs.Annotations[revisionAnn], 10, 64); err == nil {
				o.Revision = &v
			}
			if v, err := strconv.ParseInt(rs.Annotations[desiredAnn], 10, 64); err == nil {
				o.DesiredReplicas = &v
			}
			if v, err := strconv.ParseInt(rs.Annotations[maxAnn], 10, 64); err == nil {
				o.MaxReplicas = &v
			}
		}
		out.Revisions = append(out.Revisions, o)
	}

	s := final.Status
	out.Status = deploymentStatus{s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas, s.UnavailableReplicas}
	// Conditions written during the sync carry the wall clock (metav1.Now): report them as "now".
	duringPass := func(t metav1.Time) bool { return !t.Time.Before(started) && !t.Time.After(finished) }
	when := func(t metav1.Time) string {
		if duringPass(t) {
			return formatTime(now)
		}
		return formatTime(t.Time.Add(-shift))
	}
	for _, c := range s.Conditions {
		out.Conditions = append(out.Conditions, condition{
			Type: string(c.Type), Status: string(c.Status), Reason: c.Reason, Message: rename(c.Message),
			LastUpdateTime: when(c.LastUpdateTime), LastTransitionTime: when(c.LastTransitionTime),
		})
	}
	for _, e := range events.events {
		out.Events = append(out.Events, event{e.Type, e.Reason, rename(e.Message)})
	}
	switch {
	case len(q.after) > 0:
		after := q.after[len(q.after)-1]
		for _, c := range s.Conditions {
			if c.Type == apps.DeploymentProgressing && duringPass(c.LastUpdateTime) {
				after -= c.LastUpdateTime.Time.Sub(started)
			}
		}
		v := after.Seconds()
		out.RequeueAfterSeconds = &v
	case q.rateLimited > 0:
		v := 0.0
		out.RequeueAfterSeconds = &v
	}
	if syncErr != nil {
		out.SyncError = rename(syncErr.Error())
	}
	return out, nil
}

func main() {
	// The controller logs through klog; keep stdout for answers only.
	klog.SetOutput(os.Stderr)
	klog.LogToStderr(false)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	w := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(w)
	for in.Scan() {
		line := in.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		var req request
		var resp response
		if err := json.Unmarshal(line, &req); err != nil {
			resp.Error = fmt.Sprintf("malformed request: %v", err)
		} else {
			resp.ID = req.ID
			var input rolloutInput
			if err := json.Unmarshal(req.Input, &input); err != nil {
				resp.Error = fmt.Sprintf("malformed input: %v", err)
			} else if out, err := runPass(&input); err != nil {
				resp.Error = err.Error()
			} else {
				resp.Output = out
			}
		}
		if err := enc.Encode(&resp); err != nil {
			fmt.Fprintln(os.Stderr, "rollout-conformance:", err)
			os.Exit(1)
		}
		// Answer each request before reading the next, so a caller can stream.
		if err := w.Flush(); err != nil {
			fmt.Fprintln(os.Stderr, "rollout-conformance:", err)
			os.Exit(1)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "rollout-conformance:", err)
		os.Exit(1)
	}
}
