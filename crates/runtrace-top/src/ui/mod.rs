//! The terminal UI: [`state`] (what keys do), [`draw`] (state to
//! widgets) and [`run`], the loop that owns the terminal: it refreshes the
//! window at least once a second, reads keys in between, and always gives
//! the terminal back (also on a panic).

pub mod draw;
pub mod state;

use crate::snapshot::Snapshot;
use crate::source::{Live, Options, Replay};
use crossterm::event::{self, Event, KeyEventKind};
use crossterm::terminal::{self, EnterAlternateScreen, LeaveAlternateScreen};
use crossterm::ExecutableCommand;
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;
use state::{Action, App};
use std::io::{self, Stdout};
use std::time::{Duration, Instant};

/// A view's source of windows.
pub enum View {
    /// Following a recording being written.
    Live(Box<Live>),
    /// Playing a finished one.
    Replay(Box<Replay>),
}

impl View {
    /// The view of `path`: followed as it grows when `live`, else replayed.
    /// Errors name the path.
    pub fn open(path: &std::path::Path, opts: Options, live: bool) -> Result<View, String> {
        Ok(if live {
            View::Live(Box::new(Live::open(path, opts)?))
        } else {
            View::Replay(Box::new(Replay::open(path, opts)?))
        })
    }
}

/// How often the window is computed again.
pub const REFRESH: Duration = Duration::from_millis(1000);

/// Owns the terminal for [`run`]: raw mode and the alternate screen,
/// undone on drop.
struct Screen(Terminal<CrosstermBackend<Stdout>>);

impl Screen {
    fn new() -> io::Result<Screen> {
        terminal::enable_raw_mode()?;
        let mut out = io::stdout();
        if let Err(e) = out.execute(EnterAlternateScreen) {
            let _ = terminal::disable_raw_mode();
            return Err(e);
        }
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            prev(info);
        }));
        Ok(Screen(Terminal::new(CrosstermBackend::new(out))?))
    }
}

fn restore() {
    let _ = terminal::disable_raw_mode();
    let _ = io::stdout().execute(LeaveAlternateScreen);
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
        let _ = self.0.show_cursor();
    }
}

/// Runs the view on the terminal until the user quits.
pub fn run(mut view: View) -> io::Result<()> {
    let mut screen = Screen::new()?;
    let mut app = App::default();
    let mut snap: Option<Snapshot> = None;
    let mut last = Instant::now() - REFRESH;
    let mut dirty = true;
    let waiting = match &view {
        View::Live(_) => "waiting for the recording's first events ...",
        View::Replay(_) => "reading ...",
    };
    loop {
        let now = Instant::now();
        if now.duration_since(last) >= REFRESH || dirty {
            if let View::Replay(r) = &mut view {
                if !dirty || now.duration_since(last) >= REFRESH {
                    r.advance(now.duration_since(last).min(REFRESH * 2));
                }
            }
            snap = match &mut view {
                View::Live(l) => l.refresh().or(snap),
                View::Replay(r) => Some(r.snapshot()),
            };
            if now.duration_since(last) >= REFRESH {
                last = now;
            }
            dirty = false;
        }
        screen
            .0
            .draw(|f| draw::draw(f, &app, snap.as_ref(), waiting))?;
        let wait = REFRESH.saturating_sub(last.elapsed());
        if !event::poll(wait)? {
            continue;
        }
        let k = match event::read()? {
            Event::Key(k) if k.kind != KeyEventKind::Release => k,
            Event::Resize(..) => continue,
            _ => continue,
        };
        let action = app.key(k);
        let replay = match &mut view {
            View::Replay(r) => Some(r),
            View::Live(_) => None,
        };
        match (action, replay) {
            (Action::Quit, _) => return Ok(()),
            (Action::None, _) => {}
            (_, None) => {
                app.message = Some("live view: pause, step and seek are for replays".into())
            }
            (Action::TogglePause, Some(r)) => {
                r.paused = !r.paused;
                dirty = true;
            }
            (Action::Step(s), Some(r)) => {
                r.paused = true;
                r.step(s);
                dirty = true;
            }
            (Action::Seek(t), Some(r)) => {
                r.seek(t);
                dirty = true;
            }
            (Action::NextFinding, Some(r)) => {
                r.paused = true;
                if !r.next_finding() {
                    app.message = Some("no new finding from here to the end".into());
                }
                dirty = true;
            }
            (Action::Speed(x), Some(r)) => {
                r.set_speed(r.speed() * x);
                dirty = true;
            }
        }
    }
}
