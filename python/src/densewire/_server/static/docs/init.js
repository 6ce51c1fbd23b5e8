// Swagger UI over this server's /openapi.json: every asset comes from this server (no CDN), and the
// online validator badge (which would send the document to another host) is off.
window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
  tryItOutEnabled: true,
});
