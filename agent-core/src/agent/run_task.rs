//! The tasks runs execute on: one task per run at a time, reused from run to run.
//!
//! Every run is its own tokio task, so it makes progress whether or not anyone waits on it.
//! A fresh task per run costs a task cell, which tokio aligns to a cache line: glibc's
//! allocator serves no aligned allocation from its per-thread cache (2.36 splits a larger
//! chunk for every one), so that one allocation cost three to four ordinary ones on the text
//! run's path (docs/performance.md, "Kernel engine"). So a task whose run has ended waits,
//! listed on its thread, for the next run started on that thread for the same runtime, up to
//! [`IDLE_TASKS_PER_THREAD`] of them; past the bound it ends.
//!
//! Nothing a run's task did before changes: a run still starts on a task of the runtime it
//! was started in, never shares it with another run, and is dropped unpolled if that runtime
//! shuts down before the task runs it (a run handed to an idle task is dropped with that
//! task, as tokio drops a spawned one). A listed task ends when its thread exits, and the
//! oldest listed one ends when a newer one needs its place, so idle tasks never pile up.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use tokio::runtime::{Handle, Id};

/// A run's driver, as a task runs it.
pub(crate) type RunFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// How many tasks whose run ended one thread keeps for later runs.
pub(crate) const IDLE_TASKS_PER_THREAD: usize = 4;

/// Runs `run` on a task of `runtime`: an idle one this thread listed for that runtime, or a
/// new one.
pub(crate) fn spawn(runtime: &Handle, mut run: RunFuture) {
    let id = runtime.id();
    while let Some(mailbox) = take_listed(id) {
        match mailbox.hand(run) {
            Ok(()) => return,
            // Its task was dropped with its runtime, or ended: try the next one.
            Err(back) => run = back,
        }
    }
    let mailbox = Arc::new(Mailbox::new());
    // The task ends after its last run; nothing joins it, as nothing joined a run's task.
    drop(runtime.spawn(serve(id, mailbox, run)));
}

/// What an idle task waits on.
enum Slot {
    /// Waiting for a run, woken through the waker once it registered one.
    Idle(Option<Waker>),
    /// A run was handed over and the task has not taken it yet.
    Handed(RunFuture),
    /// The task is gone or must end; nothing more is handed to it.
    Closed,
}

/// Where a run is handed to an idle task.
struct Mailbox(Mutex<Slot>);

impl Mailbox {
    fn new() -> Self {
        Mailbox(Mutex::new(Slot::Idle(None)))
    }

    fn slot(&self) -> MutexGuard<'_, Slot> {
        // Nothing panics while the slot is locked; a poisoned slot is still consistent.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands `run` to the task, or gives it back if the task is gone.
    fn hand(&self, run: RunFuture) -> Result<(), RunFuture> {
        let waker = {
            let mut slot = self.slot();
            let Slot::Idle(waker) = &mut *slot else {
                return Err(run);
            };
            let waker = waker.take();
            *slot = Slot::Handed(run);
            waker
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        Ok(())
    }

    /// Closes the slot: the task ends when it next looks, and a run handed to it but not
    /// taken is returned, for the caller to drop outside the lock.
    fn close(&self) -> (Option<RunFuture>, Option<Waker>) {
        match std::mem::replace(&mut *self.slot(), Slot::Closed) {
            Slot::Idle(waker) => (None, waker),
            Slot::Handed(run) => (Some(run), None),
            Slot::Closed => (None, None),
        }
    }
}

/// Closes the mailbox when the task's future is dropped: by its runtime's shutdown, or at
/// its end. A run handed over and never taken is dropped here, unpolled; a listing the task
/// leaves behind reads as closed, and lets go of the task's waker, so the dropped task's cell
/// is freed with its runtime instead of when its thread's list lets the listing go.
struct CloseOnDrop(Arc<Mailbox>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        let (untaken, _) = self.0.close();
        drop(untaken);
    }
}

/// A task's life: its first run, then each run handed to it while it is listed.
async fn serve(runtime: Id, mailbox: Arc<Mailbox>, first: RunFuture) {
    let closing = CloseOnDrop(mailbox);
    let mut next = Some(first);
    while let Some(run) = next.take() {
        run.await;
        next = NextRun {
            runtime,
            mailbox: &closing.0,
            listed: false,
        }
        .await;
    }
}

/// Waits, listed on the current thread, for the next run.
struct NextRun<'a> {
    runtime: Id,
    mailbox: &'a Arc<Mailbox>,
    listed: bool,
}

impl Future for NextRun<'_> {
    type Output = Option<RunFuture>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<RunFuture>> {
        {
            let mut slot = self.mailbox.slot();
            match std::mem::replace(&mut *slot, Slot::Closed) {
                Slot::Handed(run) => {
                    *slot = Slot::Idle(None);
                    return Poll::Ready(Some(run));
                }
                Slot::Closed => return Poll::Ready(None),
                Slot::Idle(waker) => {
                    let waker = match waker {
                        Some(known) if known.will_wake(cx.waker()) => known,
                        _ => cx.waker().clone(),
                    };
                    *slot = Slot::Idle(Some(waker));
                }
            }
        }
        if !self.listed {
            // Listed only after its waker is registered, and only this thread takes from its
            // list, so no run is handed over before the task can be woken for it.
            if !list(self.runtime, self.mailbox) {
                return Poll::Ready(None);
            }
            self.listed = true;
        }
        Poll::Pending
    }
}

/// The idle tasks listed on one thread, oldest first; each is closed when the list drops
/// (the thread exits), so its task ends instead of waiting for a run nobody can hand it.
struct Listed(RefCell<Vec<(Id, Arc<Mailbox>)>>);

impl Drop for Listed {
    fn drop(&mut self) {
        for (_, mailbox) in self.0.get_mut().drain(..) {
            end(&mailbox);
        }
    }
}

thread_local! {
    static LISTED: Listed = const { Listed(RefCell::new(Vec::new())) };
}

/// Closes an idle task's mailbox and wakes the task, so that it ends.
fn end(mailbox: &Mailbox) {
    let (untaken, waker) = mailbox.close();
    drop(untaken);
    if let Some(waker) = waker {
        waker.wake();
    }
}

/// The most recently listed idle task of `runtime` on this thread, unlisted.
fn take_listed(runtime: Id) -> Option<Arc<Mailbox>> {
    LISTED
        .try_with(|listed| {
            let mut listed = listed.0.borrow_mut();
            let at = listed.iter().rposition(|(id, _)| *id == runtime)?;
            Some(listed.remove(at).1)
        })
        .ok()
        .flatten()
}

/// Lists an idle task of `runtime` on this thread, ending the oldest listed one if the list
/// is full; false if this thread can list nothing (it is exiting).
fn list(runtime: Id, mailbox: &Arc<Mailbox>) -> bool {
    let oldest = LISTED.try_with(|listed| {
        let mut listed = listed.0.borrow_mut();
        let oldest = (listed.len() >= IDLE_TASKS_PER_THREAD).then(|| listed.remove(0).1);
        listed.push((runtime, Arc::clone(mailbox)));
        oldest
    });
    match oldest {
        Ok(oldest) => {
            // Outside the list's borrow: waking may run code of the runtime's.
            if let Some(oldest) = oldest {
                end(&oldest);
            }
            true
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::sync::oneshot;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
    }

    /// A run that reports the runtime it ran on, once it ran.
    fn reporting(done: oneshot::Sender<Id>) -> RunFuture {
        Box::pin(async move {
            let _ = done.send(Handle::current().id());
        })
    }

    /// Starts one run and waits for it, from inside `runtime`.
    async fn one_run() -> Id {
        let (done, ran) = oneshot::channel();
        spawn(&Handle::current(), reporting(done));
        ran.await.expect("the run ran")
    }

    fn alive(runtime: &tokio::runtime::Runtime) -> usize {
        runtime.metrics().num_alive_tasks()
    }

    /// Tasks alive in the runtime this is called in.
    fn alive_here() -> usize {
        Handle::current().metrics().num_alive_tasks()
    }

    #[test]
    fn runs_one_after_another_reuse_one_task() {
        let rt = runtime();
        rt.block_on(async {
            for _ in 0..10 {
                assert_eq!(one_run().await, Handle::current().id());
                tokio::task::yield_now().await;
            }
        });
        assert_eq!(alive(&rt), 1, "the one task waits for the next run");
    }

    #[test]
    fn concurrent_runs_each_get_a_task_and_at_most_the_bound_stay() {
        for runs in [IDLE_TASKS_PER_THREAD, IDLE_TASKS_PER_THREAD + 3] {
            let rt = runtime();
            let ran = Arc::new(AtomicUsize::new(0));
            rt.block_on(async {
                let (release, gate) = tokio::sync::watch::channel(false);
                let mut done = Vec::new();
                for _ in 0..runs {
                    let (report, finished) = oneshot::channel::<()>();
                    let mut gate = gate.clone();
                    let ran = Arc::clone(&ran);
                    spawn(
                        &Handle::current(),
                        Box::pin(async move {
                            // Every run is blocked at once, so none can share a task.
                            ran.fetch_add(1, Ordering::SeqCst);
                            let _ = gate.wait_for(|open| *open).await;
                            let _ = report.send(());
                        }),
                    );
                    done.push(finished);
                }
                tokio::task::yield_now().await;
                assert_eq!(ran.load(Ordering::SeqCst), runs);
                assert_eq!(alive_here(), runs);
                release.send_replace(true);
                for finished in done {
                    finished.await.expect("finished");
                }
                // Let the ended tasks list themselves or end.
                for _ in 0..4 {
                    tokio::task::yield_now().await;
                }
            });
            assert_eq!(alive(&rt), runs.min(IDLE_TASKS_PER_THREAD), "{runs} runs");
        }
    }

    #[test]
    fn an_idle_task_of_another_runtime_is_not_used() {
        let first = runtime();
        let second = runtime();
        let first_id = first.block_on(one_run());
        let second_id = second.block_on(one_run());
        assert_ne!(first_id, second_id);
        assert_eq!(first.block_on(one_run()), first_id);
        assert_eq!(alive(&first), 1);
        assert_eq!(alive(&second), 1);
    }

    /// Counts its drops: tells whether a run was dropped rather than leaked.
    struct Dropped(Arc<AtomicUsize>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_run_handed_to_an_idle_task_is_dropped_unrun_with_its_runtime() {
        let rt = runtime();
        rt.block_on(one_run());
        let dropped = Arc::new(AtomicUsize::new(0));
        let polled = Arc::new(AtomicUsize::new(0));
        let guard = Dropped(Arc::clone(&dropped));
        let seen = Arc::clone(&polled);
        // Handed over, but the runtime never polls the idle task again.
        spawn(
            rt.handle(),
            Box::pin(async move {
                let _guard = guard;
                seen.fetch_add(1, Ordering::SeqCst);
            }),
        );
        drop(rt);
        assert_eq!(polled.load(Ordering::SeqCst), 0);
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
        // The mailbox left on this thread's list is closed and is skipped.
        let rt = runtime();
        rt.block_on(one_run());
        assert_eq!(alive(&rt), 1);
    }

    #[test]
    fn a_run_that_panics_ends_its_task_and_the_next_run_gets_another() {
        let rt = runtime();
        rt.block_on(async {
            one_run().await;
            assert_eq!(alive_here(), 1);
            let (done, ran) = oneshot::channel::<()>();
            spawn(
                &Handle::current(),
                Box::pin(async move {
                    let _done = done;
                    panic!("a run's driver panicked");
                }),
            );
            // The sender is dropped by the unwinding, so this ends with an error.
            assert!(ran.await.is_err());
            tokio::task::yield_now().await;
            assert_eq!(alive_here(), 0);
            assert_eq!(one_run().await, Handle::current().id());
        });
        assert_eq!(alive(&rt), 1);
    }

    #[test]
    fn a_task_dropped_with_its_runtime_leaves_a_closed_listing() {
        let rt = runtime();
        let id = rt.block_on(one_run());
        let listed = || {
            LISTED.with(|listed| {
                let listed = listed.0.borrow();
                let (_, mailbox) = listed.iter().rfind(|(of, _)| *of == id)?;
                Some(match &*mailbox.slot() {
                    Slot::Idle(waker) => format!("idle, waker: {}", waker.is_some()),
                    Slot::Handed(_) => "handed".to_owned(),
                    Slot::Closed => "closed".to_owned(),
                })
            })
        };
        assert_eq!(listed().as_deref(), Some("idle, waker: true"));
        drop(rt);
        assert_eq!(listed().as_deref(), Some("closed"));
    }

    #[test]
    fn idle_tasks_end_when_their_thread_exits() {
        let rt = runtime();
        std::thread::scope(|scope| {
            // `join` waits for the thread's end, its thread-local destructors included.
            let ran = scope.spawn(|| rt.block_on(one_run())).join();
            assert!(ran.is_ok());
        });
        assert_eq!(alive(&rt), 1, "listed on the exited thread");
        rt.block_on(async {
            for _ in 0..4 {
                tokio::task::yield_now().await;
            }
        });
        assert_eq!(alive(&rt), 0, "woken by the list's drop, and ended");
    }
}
