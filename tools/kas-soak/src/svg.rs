//! The lateness histogram as SVG.

use std::fmt::Write as _;

use crate::stats::Report;

impl Report {
    /// The lateness histogram: bars per bin, axes in ms and connections
    /// (a log scale, so the few connections of the tail that p99 and max
    /// describe stay visible beside the thousands of the body), markers at
    /// 0 (the expected timeout), p50 and p99. The title names the run's
    /// parameters: connections, batch size, timeout.
    pub fn svg(&self) -> String {
        const W: f64 = 960.0;
        const H: f64 = 540.0;
        const LEFT: f64 = 80.0;
        const RIGHT: f64 = 30.0;
        const TOP: f64 = 70.0;
        const BOTTOM: f64 = 70.0;
        let plot_w = W - LEFT - RIGHT;
        let plot_h = H - TOP - BOTTOM;
        let ms = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.3}"));
        let stats = self.stats();
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="DejaVu Sans, Arial, sans-serif">"#
        );
        let _ = writeln!(s, r##"<rect width="{W}" height="{H}" fill="#ffffff"/>"##);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="28" font-size="17" text-anchor="middle" font-weight="bold">Idle keep-alive close lateness: {} connections opened in batches of {}, timeout {}</text>"#,
            W / 2.0,
            self.n,
            self.batch,
            humantime::format_duration(self.expect)
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="52" font-size="14" text-anchor="middle">closed {}/{}, early {}, not closed {}; ms: {}</text>"#,
            W / 2.0,
            self.closed,
            self.responded,
            self.early,
            self.not_closed,
            stats
                .iter()
                .map(|(name, v)| format!("{name} {}", ms(*v)))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let (Some(&min), Some(&max)) = (self.lateness.first(), self.lateness.last()) else {
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{}" font-size="16" text-anchor="middle">no connection closed</text>"#,
                W / 2.0,
                H / 2.0
            );
            s.push_str("</svg>\n");
            return s;
        };
        // Bins: a 1-2-5 width giving about 60 bins over [min(min, 0), max].
        let lo_raw = min.min(0.0);
        let width = nice_step((max - lo_raw).max(0.001) / 60.0);
        let lo = (lo_raw / width).floor() * width;
        let bins = (((max - lo) / width).floor() as usize + 1).max(1);
        let hi = lo + bins as f64 * width;
        let mut counts = vec![0usize; bins];
        for &v in &self.lateness {
            counts[(((v - lo) / width).floor() as usize).min(bins - 1)] += 1;
        }
        let peak = counts.iter().copied().max().unwrap_or(1).max(1);
        // Log scale from just under 1 (so a bin of one still shows) to the
        // decade above the peak.
        let decades = (peak as f64).log10().ceil().max(1.0);
        let y_top = 10f64.powf(decades);
        let y_floor = 0.5f64;
        let x_of = |v: f64| LEFT + (v - lo) / (hi - lo) * plot_w;
        let y_of = |c: f64| {
            let c = c.max(y_floor);
            TOP + plot_h - (c / y_floor).log10() / (y_top / y_floor).log10() * plot_h
        };

        // Grid and y axis labels: 1, 10, 100, ...
        for decade in 0..=decades as i32 {
            let tick = 10f64.powi(decade);
            let y = y_of(tick);
            let _ = writeln!(
                s,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e0e0e0"/><text x="{:.1}" y="{:.1}" font-size="12" text-anchor="end">{}</text>"##,
                LEFT + plot_w,
                LEFT - 8.0,
                y + 4.0,
                tick as u64
            );
        }
        // Bars.
        for (i, &count) in counts.iter().enumerate() {
            if count == 0 {
                continue;
            }
            let x0 = x_of(lo + i as f64 * width);
            let x1 = x_of(lo + (i + 1) as f64 * width);
            let y = y_of(count as f64);
            let fill = if lo + (i + 1) as f64 * width <= 0.0 {
                "#d62728"
            } else {
                "#1f77b4"
            };
            let _ = writeln!(
                s,
                r##"<rect x="{x0:.2}" y="{y:.2}" width="{:.2}" height="{:.2}" fill="{fill}" stroke="#ffffff" stroke-width="0.5"><title>[{:.3}, {:.3}) ms: {count}</title></rect>"##,
                (x1 - x0).max(0.5),
                TOP + plot_h - y,
                lo + i as f64 * width,
                lo + (i + 1) as f64 * width
            );
        }
        // X axis ticks: a 1-2-5 step giving about 10 labels.
        let x_step = nice_step((hi - lo) / 10.0);
        let decimals = decimals_for(x_step);
        let mut v = (lo / x_step).ceil() * x_step;
        while v <= hi + x_step * 1e-6 {
            let x = x_of(v);
            let _ = writeln!(
                s,
                r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#000000"/><text x="{x:.1}" y="{:.1}" font-size="12" text-anchor="middle">{:.*}</text>"##,
                TOP + plot_h,
                TOP + plot_h + 6.0,
                TOP + plot_h + 22.0,
                decimals,
                if v.abs() < x_step * 1e-6 { 0.0 } else { v }
            );
            v += x_step;
        }
        // Axes.
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{:.1}" stroke="#000000"/><line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#000000"/>"##,
            TOP + plot_h,
            TOP + plot_h,
            LEFT + plot_w,
            TOP + plot_h
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" font-size="14" text-anchor="middle">close lateness: time from last response byte to EOF, minus {} (ms); bin {} ms</text>"#,
            LEFT + plot_w / 2.0,
            H - 18.0,
            humantime::format_duration(self.expect),
            fmt_trim(width)
        );
        let _ = writeln!(
            s,
            r#"<text x="20" y="{:.1}" font-size="14" text-anchor="middle" transform="rotate(-90 20 {:.1})">connections (log scale)</text>"#,
            TOP + plot_h / 2.0,
            TOP + plot_h / 2.0
        );
        // Markers.
        let mut markers = vec![
            ("p50", stats[1].1, "#2ca02c"),
            ("p99", stats[2].1, "#ff7f0e"),
        ];
        if lo < 0.0 {
            markers.push(("timeout", Some(0.0), "#d62728"));
        }
        for (k, (label, value, color)) in markers.into_iter().enumerate() {
            let Some(value) = value else { continue };
            let x = x_of(value);
            // Labels near the right edge go to the left of their line.
            let (label_x, anchor) = if x > LEFT + plot_w - 100.0 {
                (x - 4.0, "end")
            } else {
                (x + 4.0, "start")
            };
            let _ = writeln!(
                s,
                r#"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="{color}" stroke-width="1.5" stroke-dasharray="5,4"/><text x="{label_x:.1}" y="{:.1}" font-size="12" fill="{color}" text-anchor="{anchor}">{label} {value:.3}</text>"#,
                TOP + plot_h,
                TOP + 14.0 + 16.0 * k as f64
            );
        }
        s.push_str("</svg>\n");
        s
    }
}

/// The smallest 1, 2 or 5 times a power of ten that is >= `raw`.
fn nice_step(raw: f64) -> f64 {
    let raw = raw.max(1e-6);
    let base = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * base)
        .find(|&s| s >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * base)
}

/// Decimals needed to print multiples of `step` exactly.
fn decimals_for(step: f64) -> usize {
    (-step.log10().floor()).max(0.0) as usize
}

fn fmt_trim(v: f64) -> String {
    format!("{v:.*}", decimals_for(v))
}
