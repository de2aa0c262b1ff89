"use strict";
const feed = new EventSource("/events");
feed.onmessage = (e) => { document.getElementById("app").textContent = e.data; };
