// Starts Swagger UI on /openapi.json (a file of its own: the Content-Security-Policy forbids inline scripts).
window.ui = SwaggerUIBundle({url: "/openapi.json", dom_id: "#swagger-ui", deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis], layout: "BaseLayout"});
