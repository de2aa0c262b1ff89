//! The lateness histogram as SVG, drawn by plotters (its SVG backend only).
//! Ours are the binning (a 1-2-5 width, about 60 bins), the colours and the
//! markers; plotters lays out the axes, the log scale, ticks and text.

use std::error::Error;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::stats::Report;

const W: u32 = 960;
const H: u32 = 540;
const BLUE: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const RED: RGBColor = RGBColor(0xd6, 0x27, 0x28);
const GREEN: RGBColor = RGBColor(0x2c, 0xa0, 0x2c);
const ORANGE: RGBColor = RGBColor(0xff, 0x7f, 0x0e);
/// plotters writes a font of size `s` as `s / 1.24` px: the sizes below are
/// these px (title 17, subtitle 14, axis names 14, labels 12) times 1.24.
const TITLE: f64 = 21.0;
const SUBTITLE: f64 = 17.4;
const AXIS_NAME: f64 = 17.4;
const LABEL: f64 = 14.9;

impl Report {
    /// The lateness histogram: bars per bin, axes in ms and connections
    /// (a log scale, so the few connections of the tail that p99 and max
    /// describe stay visible beside the thousands of the body), markers at
    /// 0 (the expected timeout), p50 and p99. The title names the run's
    /// parameters: connections, batch size, timeout.
    pub fn svg(&self) -> Result<String, String> {
        let mut svg = String::new();
        self.draw(&mut svg)
            .map_err(|e| format!("cannot draw the histogram: {e}"))?;
        Ok(svg)
    }

    fn draw(&self, out: &mut String) -> Result<(), Box<dyn Error>> {
        let ms = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.3}"));
        let stats = self.stats();
        let root = SVGBackend::with_string(out, (W, H)).into_drawing_area();
        root.fill(&WHITE)?;
        let centred = |text: String, y: i32, font: FontDesc<'static>| {
            let style = TextStyle::from(font).pos(Pos::new(HPos::Center, VPos::Center));
            root.draw(&Text::new(text, (W as i32 / 2, y), style))
        };
        let title = format!(
            "Idle keep-alive close lateness: {} connections opened in batches of {}, timeout {}",
            self.n,
            self.batch,
            humantime::format_duration(self.expect)
        );
        centred(title, 24, font(TITLE).style(FontStyle::Bold))?;
        let subtitle = format!(
            "closed {}/{}, early {}, not closed {}; ms: {}",
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
        centred(subtitle, 48, font(SUBTITLE))?;
        let (Some(&min), Some(&max)) = (self.lateness.first(), self.lateness.last()) else {
            centred("no connection closed".into(), H as i32 / 2, font(AXIS_NAME))?;
            root.present()?;
            return Ok(());
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
        let y_top = 10f64.powf((peak as f64).log10().ceil().max(1.0));
        let y_floor = 0.5f64;

        let (_, plot_area) = root.split_vertically(62);
        let mut chart = ChartBuilder::on(&plot_area)
            .margin_left(10)
            .margin_right(30)
            .x_label_area_size(56)
            .y_label_area_size(72)
            .build_cartesian_2d(lo..hi, (y_floor..y_top).log_scale())?;
        let decimals = decimals_for(nice_step((hi - lo) / 10.0));
        let x_label = |v: &f64| format!("{v:.decimals$}");
        let y_label = |v: &f64| format!("{v}");
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(10)
            .x_label_formatter(&x_label)
            .y_label_formatter(&y_label)
            .x_desc(format!(
                "close lateness: time from last response byte to EOF, minus {} (ms); bin {} ms",
                humantime::format_duration(self.expect),
                fmt_trim(width)
            ))
            .y_desc("connections (log scale)")
            .axis_desc_style(font(AXIS_NAME))
            .label_style(font(LABEL))
            .draw()?;
        // Bars, a pixel apart; red where the whole bin is early.
        chart.draw_series(counts.iter().enumerate().filter(|(_, n)| **n > 0).map(
            |(i, &count)| {
                let (x0, x1) = (lo + i as f64 * width, lo + (i + 1) as f64 * width);
                let colour = if x1 <= 0.0 { RED } else { BLUE };
                let mut bar = Rectangle::new([(x0, y_floor), (x1, count as f64)], colour.filled());
                bar.set_margin(0, 0, 0, 1);
                bar
            },
        ))?;
        let mut markers = vec![("p50", stats[1].1, GREEN), ("p99", stats[2].1, ORANGE)];
        if lo < 0.0 {
            markers.push(("timeout", Some(0.0), RED));
        }
        for (k, (label, value, colour)) in markers.into_iter().enumerate() {
            let Some(value) = value else { continue };
            let line = [(value, y_floor), (value, y_top)];
            chart.draw_series(DashedLineSeries::new(line, 5, 4, colour.stroke_width(1)))?;
            let (x, top) = chart.backend_coord(&(value, y_top));
            // Labels near the right edge go to the left of their line.
            let (x, anchor) = if x > (W - 130) as i32 {
                (x - 4, HPos::Right)
            } else {
                (x + 4, HPos::Left)
            };
            let style = font(LABEL)
                .color(&colour)
                .pos(Pos::new(anchor, VPos::Center));
            let at = (x, top + 10 + 16 * k as i32);
            root.draw(&Text::new(format!("{label} {value:.3}"), at, style))?;
        }
        root.present()?;
        Ok(())
    }
}

fn font(size: f64) -> FontDesc<'static> {
    ("DejaVu Sans, Arial, sans-serif", size).into_font()
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
